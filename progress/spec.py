"""Graph specs: a graph as canonical JSON data, its content hash, and what changed between two.

A spec is what the ledger stores for a registered pipeline. ``diff`` tells a change that only
adds stages (accepted) from any other (refused, with each difference named).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from progress.graph import Graph, GraphBuilder
from progress.location import Source, Target
from progress.summary import Delay, PathSummary, ProductSummary
from progress.timestamp import time_from_data, time_to_data

Spec = dict[str, Any]


def encode_summary(s: PathSummary) -> Any:
    if isinstance(s, ProductSummary):
        return [encode_summary(s.outer), encode_summary(s.inner)]
    return s.k


def decode_summary(data: Any) -> PathSummary:
    if isinstance(data, list):
        return ProductSummary(decode_summary(data[0]), decode_summary(data[1]))
    return Delay(data)


def to_spec(graph: Graph) -> Spec:
    """The canonical data of a graph: equal graphs give equal specs."""
    return {
        "minimum": time_to_data(graph.minimum),
        "nodes": {
            name: {
                "inputs": spec.inputs,
                "outputs": spec.outputs,
                "workers": spec.workers,
                "summaries": [
                    [i, o, [encode_summary(s) for s in listed]]
                    for (i, o), listed in sorted(spec.summaries.items())
                ],
            }
            for name, spec in sorted(graph.nodes.items())
        },
        "edges": sorted(
            [s.node, s.port, t.node, t.port] for s, targets in graph.edges.items() for t in targets
        ),
    }


def from_spec(spec: Spec) -> Graph:
    """Compile a spec back into a graph (validating it again)."""
    builder = GraphBuilder(time_from_data(spec["minimum"]))
    for name, node in spec["nodes"].items():
        builder.add_node(
            name,
            inputs=node["inputs"],
            outputs=node["outputs"],
            summaries={
                (i, o): [decode_summary(s) for s in listed] for i, o, listed in node["summaries"]
            },
            workers=node["workers"],
        )
    for src, out, tgt, inp in spec["edges"]:
        builder.add_edge(Source(src, out), Target(tgt, inp))
    return builder.compile()


def canonical(spec: Spec) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def spec_hash(spec: Spec) -> str:
    """The content hash of a spec: sha256 of its canonical JSON."""
    return hashlib.sha256(canonical(spec).encode()).hexdigest()


@dataclass(frozen=True)
class SpecDiff:
    """What a new spec changes: nodes and edges it adds, and every other difference."""

    added_nodes: tuple[str, ...]
    added_edges: tuple[tuple[str, int, str, int], ...]
    refused: tuple[str, ...]

    @property
    def only_adds(self) -> bool:
        return not self.refused

    @property
    def unchanged(self) -> bool:
        return not (self.added_nodes or self.added_edges or self.refused)


def diff(old: Spec, new: Spec) -> SpecDiff:
    """Compare two specs. Adding nodes, and edges into added nodes, is an addition; anything
    else (a removed or changed node, a removed edge, an edge into an existing node) is refused.

    >>> a = {"minimum": 0, "nodes": {"x": {"inputs": 0}}, "edges": []}
    >>> b = {"minimum": 0, "nodes": {"x": {"inputs": 1}}, "edges": []}
    >>> diff(a, b).refused
    ("stage 'x' changed: inputs 0 -> 1",)
    """
    refused: list[str] = []
    if old["minimum"] != new["minimum"]:
        refused.append(f"minimum time changed: {old['minimum']} -> {new['minimum']}")
    for name, node in old["nodes"].items():
        if name not in new["nodes"]:
            refused.append(f"stage {name!r} was removed")
            continue
        changes = [
            f"{field} {node[field]} -> {new['nodes'][name][field]}"
            for field in sorted(node)
            if node[field] != new["nodes"][name].get(field)
        ]
        if changes:
            refused.append(f"stage {name!r} changed: {'; '.join(changes)}")
    old_edges = {tuple(e) for e in old["edges"]}
    new_edges = {tuple(e) for e in new["edges"]}
    for src, out, tgt, inp in sorted(old_edges - new_edges):
        refused.append(f"edge {src}.out{out} -> {tgt}.in{inp} was removed")
    added_edges = []
    for edge in sorted(new_edges - old_edges):
        src, out, tgt, inp = edge
        if tgt in old["nodes"]:
            refused.append(f"edge {src}.out{out} -> {tgt}.in{inp} feeds existing stage {tgt!r}")
        else:
            added_edges.append(edge)
    added_nodes = tuple(sorted(set(new["nodes"]) - set(old["nodes"])))
    return SpecDiff(added_nodes, tuple(added_edges), tuple(refused))
