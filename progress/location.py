"""Locations in a dataflow graph: output ports (`Source`) and input ports (`Target`).

A pointstamp is a ``(location, time)`` pair. Both kinds sort together (by node, then port, then
sources before targets) so batches of pointstamps can be listed in a stable order.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias


class _Port:
    __slots__ = ("node", "port")
    _kind: ClassVar[int]

    def __init__(self, node: str, port: int = 0) -> None:
        if not isinstance(node, str):
            raise TypeError(f"node names are strings, got {node!r}")
        if type(port) is not int or port < 0:
            raise TypeError(f"ports are ints >= 0, got {port!r}")
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "port", port)

    node: str
    port: int

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple[str, int, int]:
        return (self.node, self.port, self._kind)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Port):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: _Port) -> bool:
        return self._key() < other._key()

    def __le__(self, other: _Port) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: _Port) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: _Port) -> bool:
        return self._key() >= other._key()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.node!r}, {self.port})"

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return (type(self), (self.node, self.port))


class Source(_Port):
    """An output port of a node: where capabilities are held and messages are produced."""

    __slots__ = ()
    _kind = 0


class Target(_Port):
    """An input port of a node: where messages wait to be consumed."""

    __slots__ = ()
    _kind = 1


Location: TypeAlias = Source | Target
"""A port of the graph: where pointstamps are counted."""
