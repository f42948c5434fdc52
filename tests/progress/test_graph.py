"""Building graphs: validation errors, summaries between locations, initial capabilities."""

from __future__ import annotations

import pytest

from progress import (
    CycleError,
    DanglingPortError,
    Delay,
    DuplicateNodeError,
    GraphBuilder,
    InvalidSummaryError,
    Product,
    ProductSummary,
    Source,
    Target,
    UnknownNodeError,
    UnknownPortError,
)

pytestmark = pytest.mark.unit


def chain() -> GraphBuilder:
    b = GraphBuilder()
    b.add_node("src", inputs=0, outputs=1, workers=3)
    b.add_node("a", inputs=1, outputs=1, workers=0, summaries={(0, 0): [Delay(2), Delay(5)]})
    b.add_edge(Source("src"), Target("a"))
    return b


def test_summaries_compose_along_paths_and_stay_minimal() -> None:
    g = chain().compile()
    assert g.summaries(Source("src"), Source("a")).elements == (Delay(2),)
    assert g.summaries(Target("a"), Target("a")).elements == (Delay(0),)
    assert g.summaries(Source("a"), Source("src")).is_empty()
    assert g.initial_batch() == [(Source("src"), 0, 3)]


def test_duplicate_and_unknown_nodes_are_named() -> None:
    b = chain()
    with pytest.raises(DuplicateNodeError) as dup:
        b.add_node("a", inputs=1, outputs=1)
    assert dup.value.node == "a"
    with pytest.raises(UnknownNodeError) as unknown:
        b.add_edge(Source("nope"), Target("a"))
    assert unknown.value.node == "nope"
    assert "known nodes: src, a" in str(unknown.value)


def test_ports_out_of_range_are_refused() -> None:
    b = chain()
    with pytest.raises(UnknownPortError) as err:
        b.add_edge(Source("src", 1), Target("a"))
    assert err.value.location == Source("src", 1)
    with pytest.raises(UnknownPortError):
        b.add_node("x", inputs=1, outputs=1, summaries={(1, 0): [Delay(0)]})


def test_dangling_input_is_refused() -> None:
    b = chain()
    b.add_node("lonely", inputs=2, outputs=1)
    b.add_edge(Source("a"), Target("lonely", 0))
    with pytest.raises(DanglingPortError) as err:
        b.compile()
    assert err.value.location == Target("lonely", 1)


def test_summary_of_wrong_shape_is_refused() -> None:
    b = GraphBuilder(minimum=Product(0, 0))
    with pytest.raises(InvalidSummaryError):
        b.add_node("x", inputs=1, outputs=1, summaries={(0, 0): [Delay(1)]})
    b.add_node("y", inputs=1, outputs=1, summaries={(0, 0): [ProductSummary(0, 1)]})


def test_self_loop_names_the_stage_twice() -> None:
    b = GraphBuilder()
    b.add_node("s", inputs=0, outputs=1)
    b.add_node("x", inputs=2, outputs=1, workers=0)
    b.add_edge(Source("s"), Target("x", 0))
    b.add_edge(Source("x"), Target("x", 1))
    with pytest.raises(CycleError) as err:
        b.compile()
    assert err.value.cycle == ("x", "x")
    assert "x -> x does not strictly advance time" in str(err.value)


def test_bad_node_settings_are_refused() -> None:
    b = GraphBuilder()
    with pytest.raises(TypeError):
        b.add_node("", inputs=0, outputs=1)
    with pytest.raises(TypeError):
        b.add_node("n", inputs=-1, outputs=1)
    with pytest.raises(TypeError):
        b.add_edge(Target("n"), Source("n"))  # type: ignore[arg-type]


def test_depths_order_nodes_from_the_inputs_and_ignore_closing_edges() -> None:
    b = GraphBuilder()
    b.add_node("src", inputs=0, outputs=1)
    b.add_node("a", inputs=2, outputs=1, workers=0)
    b.add_node("b", inputs=1, outputs=1, workers=0, summaries={(0, 0): [Delay(1)]})
    b.add_edge(Source("src"), Target("a", 0))
    b.add_edge(Source("a"), Target("b"))
    b.add_edge(Source("b"), Target("a", 1))  # feedback, one epoch later
    assert b.compile().depths() == {"src": 0, "a": 1, "b": 2}
