"""A record checker generated as straight-line Python from a schema tree, for the collector's hot path.

The collector checks every partition of every poll before publishing it (schemas/observation.py
`check`). Walking the tree with one closure per node costs a call per field; this module writes
the whole tree out as one function of nested loops and inline type tests instead, compiled once.

It answers only "valid or not", and conservatively: a record it accepts is one the tree walker
accepts (exact types, bounds, required fields); anything it rejects is handed to the walker, which
decides and words the error. So the two can never disagree on a verdict or a message.
"""

from __future__ import annotations

from typing import Any, Callable

class _Writer:
    def __init__(self, ranges: dict[str, tuple[int, int]]) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.ranges = ranges  # integer type -> (lowest, highest), the walker's own bounds

    def var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)


def _scalar_test(name: str, v: str, ranges: dict[str, tuple[int, int]]) -> str:
    """A Python expression true when `v` is NOT a valid value of scalar type `name`."""
    if name == "string":
        return f"type({v}) is not str"
    if name == "bool":
        return f"type({v}) is not bool"
    if name == "double":
        return f"(type({v}) is not float and type({v}) is not int)"
    lo, hi = ranges[name]
    return f"(type({v}) is not int or not {lo} <= {v} <= {hi})"


def _value(w: _Writer, t: Any, v: str, depth: int) -> None:
    """Statements that return False unless `v` (not None) is a valid `t`."""
    kind = type(t).__name__
    if kind == "Scalar":
        w.emit(depth, f"if {_scalar_test(t.name, v, w.ranges)}: return False")
    elif kind == "Array":
        w.emit(depth, f"if type({v}) is not list: return False")
        item = w.var()
        w.emit(depth, f"for {item} in {v}:")
        if type(t.element).__name__ == "Scalar":
            w.emit(depth + 1, f"if {_scalar_test(t.element.name, item, w.ranges)}: return False")
        else:
            _value(w, t.element, item, depth + 1)
    else:
        w.emit(depth, f"if type({v}) is not dict: return False")
        for name, field_type, required in t.fields:
            f = w.var()
            w.emit(depth, f"{f} = {v}.get({name!r})")
            if required:
                w.emit(depth, f"if {f} is None: return False")
                _value(w, field_type, f, depth)
            else:
                w.emit(depth, f"if {f} is not None:")
                _value(w, field_type, f, depth + 1)


def generate(t: Any, ranges: dict[str, tuple[int, int]]) -> Callable[[Any], bool]:
    """A function `record -> bool` for schema tree `t` (a Struct of schemas/observation.py), with
    `ranges` the bounds of its integer types."""
    w = _Writer(ranges)
    w.emit(0, "def fast(v0):")
    _value(w, t, "v0", 1)
    w.emit(1, "return True")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(w.lines), f"<fast check of {type(t).__name__}>", "exec"), namespace)  # noqa: S102 - our own schema
    return namespace["fast"]  # type: ignore[no-any-return]
