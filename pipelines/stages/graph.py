"""A pipeline's stages compiled to its progress graph: a node per stage with its delay as the
summary of each input to its output, an edge per input; a cycle that does not advance time is
refused naming it."""

from __future__ import annotations

from collections.abc import Mapping

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.kinds import Stage
from progress import CycleError, Delay, Graph, GraphBuilder, Source, Target


def compile_graph(
    pipeline: str, stages: Mapping[str, Stage], feedback: Mapping[str, str | None]
) -> Graph:
    """The progress graph of ``stages``; ``feedback`` maps each feedback stage to the stage
    connected to it (None: never connected, refused)."""
    for name, source in feedback.items():
        if source is None:
            raise PipelineDefinitionError(pipeline, name, "feedback was never connected")
    builder = GraphBuilder()
    for stage in stages.values():
        outputs = stage.outputs
        summaries = {(i, 0): [Delay(stage.delay)] for i in range(len(stage.inputs))}
        builder.add_node(
            stage.name,
            inputs=len(stage.inputs),
            outputs=outputs,
            summaries=summaries if outputs else {},
            workers=stage.workers,
        )
    for stage in stages.values():
        for port, upstream in enumerate(stage.inputs):
            builder.add_edge(Source(upstream, 0), Target(stage.name, port))
    try:
        return builder.compile()
    except CycleError as err:
        raise PipelineDefinitionError(
            pipeline,
            err.cycle[0],
            f"cycle {' -> '.join(err.cycle)} does not advance time; give its feedback a delay",
        ) from err
