"""Records without the dataclasses module, for the in-container half.

`@record` gives a class an __init__ of its annotated fields, in order (a default, or
`field(default_factory=...)`, makes one optional; a key it does not know, or one it lacks,
is a TypeError), __eq__ and __repr__; `@record(frozen=True)` also makes it read-only and
hashable. `as_dict` turns records into plain data, `replace` copies one with some fields
changed. Type checkers see a dataclass (PEP 681).

Why not dataclasses: importing it imports inspect, and each decorated class compiles its
methods from text at import. Every run imports the order's records before it does anything,
and the two cost it 25 to 30 ms of CPU (measured in a Python 3.13 image under load, about
a quarter of the supervisor's start). These compile nothing.

Standard library only, Python 3.9+.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f


T = TypeVar("T")
_MISSING = object()


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made anew for each record (`default_factory()`)."""
    return _Factory(default_factory)


def _fields(cls: type) -> tuple[str, ...] | None:
    """A record class's field names, in order; None for any other class."""
    fields: tuple[str, ...] | None = getattr(cls, "__record_fields__", None)
    return fields


def _make(cls: type, frozen: bool) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, d in defaults.items():
        if isinstance(d, _Factory):
            delattr(cls, n)  # as dataclasses does: the class keeps no shared instance
    setter = object.__setattr__
    where = cls.__name__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{where}() takes {len(names)} arguments but {len(args)} were given")
        values = {names[i]: a for i, a in enumerate(args)}
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{where}() got an unexpected keyword argument {k!r}")
            if k in values:
                raise TypeError(f"{where}() got multiple values for argument {k!r}")
            values[k] = v
        for n in names:
            if n not in values:
                d = defaults.get(n, _MISSING)
                if d is _MISSING:
                    raise TypeError(f"{where}() missing required argument: {n!r}")
                values[n] = d.make() if isinstance(d, _Factory) else d
            setter(self, n, values[n])

    def __eq__(self: Any, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __repr__(self: Any) -> str:
        return f"{where}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    cls.__record_fields__ = names  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]
    cls.__eq__ = __eq__  # type: ignore[method-assign,assignment]
    cls.__repr__ = __repr__  # type: ignore[method-assign,assignment]
    if frozen:

        def __setattr__(self: Any, name: str, value: Any = None) -> None:  # and __delattr__
            raise AttributeError(f"{where} is frozen: cannot assign or delete {name!r}")

        def __hash__(self: Any) -> int:
            return hash(tuple(getattr(self, n) for n in names))

        cls.__setattr__ = __setattr__  # type: ignore[method-assign]
        cls.__delattr__ = __setattr__  # type: ignore[method-assign,assignment]
        cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    else:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as a dataclass
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def as_dict(value: Any) -> Any:
    """Records as dicts of their fields, recursively through lists, tuples and dicts."""
    fields = _fields(type(value))
    if fields is not None:
        return {n: as_dict(getattr(value, n)) for n in fields}
    if isinstance(value, (list, tuple)):
        return type(value)(as_dict(v) for v in value)
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    return value


def replace(value: T, **changes: Any) -> T:
    """A copy of record `value` with `changes`."""
    fields = _fields(type(value))
    if fields is None:
        raise TypeError(f"replace() of {type(value).__name__}, not a record")
    return type(value)(**{**{n: getattr(value, n) for n in fields}, **changes})
