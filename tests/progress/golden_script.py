"""A small script language for golden progress-tracking cases (see ``golden/*.txt``).

Each line is one step; ``#`` starts a comment. Locations are ``node.outN`` (a ``Source``) and
``node.inN`` (a ``Target``); times are ``3`` or ``(1,2)``; summaries are ``1`` (``Delay(1)``)
or ``0/1`` (``ProductSummary(0, 1)``), several separated by ``|``.

    time int|product
    node NAME in=N out=M [workers=W] [I>O=S|S ...]   # no I>O pairs given: identity everywhere
    edge A.outN -> B.inN
    build | build fails CycleError a -> b -> a
    apply initial | apply LOC@T+N LOC@T-N ...
    send NAME WORKER | advance NAME WORKER T | close NAME WORKER | run NAME T
    frontier LOC = [T, ...] | count LOC T = N
    ready NAME T | not-ready NAME T | blockers NAME T = LOC@T ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from progress import (
    CycleError,
    Delay,
    GraphBuilder,
    InputHandle,
    Location,
    PathSummary,
    Product,
    ProductSummary,
    Source,
    Target,
    Time,
    Tracker,
    input_handle,
)

_LOCATION = re.compile(r"^(\w+)\.(in|out)(\d+)$")


def parse_time(text: str) -> Time:
    text = text.strip()
    if text.startswith("("):
        outer, inner = text.strip("()").split(",")
        return Product(int(outer), int(inner))
    return int(text)


def parse_location(text: str) -> Location:
    match = _LOCATION.match(text)
    if match is None:
        raise ValueError(f"not a location: {text!r}")
    node, kind, port = match.groups()
    return Source(node, int(port)) if kind == "out" else Target(node, int(port))


def parse_summary(text: str) -> PathSummary:
    if "/" in text:
        outer, inner = text.split("/")
        return ProductSummary(int(outer), int(inner))
    return Delay(int(text))


def _split_times(text: str) -> list[str]:
    return re.findall(r"\(\d+,\d+\)|\d+", text)


def run_script(path: Path) -> None:
    builder = GraphBuilder()
    tracker: Tracker | None = None
    handles: dict[tuple[str, int], InputHandle] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path.name}:{number}: {line}"
        words = line.split()
        verb, rest = words[0], words[1:]
        if verb == "time":
            builder = GraphBuilder(minimum=Product(0, 0) if rest[0] == "product" else 0)
        elif verb == "node":
            settings = dict(w.split("=", 1) for w in rest[1:] if ">" not in w)
            pairs = [w for w in rest[1:] if ">" in w]
            summaries = None
            if pairs:
                summaries = {}
                for pair in pairs:
                    ports, listed = pair.split("=")
                    i, o = ports.split(">")
                    summaries[(int(i), int(o))] = [parse_summary(s) for s in listed.split("|")]
            builder.add_node(
                rest[0],
                inputs=int(settings["in"]),
                outputs=int(settings["out"]),
                summaries=summaries,
                workers=int(settings.get("workers", "1")),
            )
        elif verb == "edge":
            src, tgt = parse_location(rest[0]), parse_location(rest[2])
            assert isinstance(src, Source), where
            assert isinstance(tgt, Target), where
            builder.add_edge(src, tgt)
        elif verb == "build":
            if rest[:2] == ["fails", "CycleError"]:
                with pytest.raises(CycleError) as info:
                    builder.compile()
                expected = tuple(w for w in rest[2:] if w != "->")
                assert info.value.cycle == expected, f"{where}: got cycle {info.value.cycle}"
                return
            tracker = Tracker(builder.compile())
        else:
            assert tracker is not None, f"{where}: build first"
            _step(tracker, handles, verb, rest, where)


def _step(
    tracker: Tracker,
    handles: dict[tuple[str, int], InputHandle],
    verb: str,
    rest: list[str],
    where: str,
) -> None:
    def handle(name: str, worker: str) -> InputHandle:
        key = (name, int(worker))
        if key not in handles:
            handles[key] = input_handle(tracker, name, int(worker))
        return handles[key]

    if verb == "apply":
        if rest == ["initial"]:
            tracker.apply(tracker.initial_batch())
            return
        batch = []
        for item in rest:
            loc, change = item.split("@")
            match = re.match(r"^(\(\d+,\d+\)|\d+)([+-]\d+)$", change)
            assert match is not None, where
            batch.append((parse_location(loc), parse_time(match.group(1)), int(match.group(2))))
        tracker.apply(batch)
    elif verb == "send":
        tracker.apply(handle(rest[0], rest[1]).send())
    elif verb == "advance":
        tracker.apply(handle(rest[0], rest[1]).advance_to(parse_time(" ".join(rest[2:]))))
    elif verb == "close":
        tracker.apply(handle(rest[0], rest[1]).close())
    elif verb == "run":
        time = parse_time(" ".join(rest[1:]))
        assert tracker.ready(rest[0], time), (
            f"{where}: not ready: {tracker.blockers(rest[0], time)}"
        )
        tracker.apply(tracker.stage_batch(rest[0], time))
    elif verb == "frontier":
        got = tracker.frontier(parse_location(rest[0])).elements
        want = tuple(sorted(parse_time(t) for t in _split_times(" ".join(rest[2:]))))  # type: ignore[type-var]
        assert got == want, f"{where}: frontier is {list(got)}"
    elif verb == "count":
        got_count = tracker.count(parse_location(rest[0]), parse_time(rest[1]))
        assert got_count == int(rest[3]), f"{where}: count is {got_count}"
    elif verb in ("ready", "not-ready"):
        time = parse_time(" ".join(rest[1:]))
        got_ready = tracker.ready(rest[0], time)
        assert got_ready == (verb == "ready"), (
            f"{where}: blockers {tracker.blockers(rest[0], time)}"
        )
        assert got_ready == (not tracker.blockers(rest[0], time)), f"{where}: blockers disagree"
    elif verb == "blockers":
        eq = rest.index("=")
        node, time = rest[0], parse_time(" ".join(rest[1:eq]))
        got_set = {(b.location, b.time) for b in tracker.blockers(node, time)}
        want_set = set()
        for item in rest[eq + 1 :]:
            loc, t = item.split("@")
            want_set.add((parse_location(loc), parse_time(t)))
        assert got_set == want_set, f"{where}: blockers are {sorted(map(str, got_set))}"
    else:
        raise AssertionError(f"{where}: unknown step {verb!r}")
