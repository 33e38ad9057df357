"""The value specs of a document definition (:mod:`spectune.documents.docspec`): a part of a
document (:class:`Spec`) is a :class:`Number`, :class:`Text`, :class:`Flag`, :class:`Choice`,
:class:`Const`, :class:`Nullable`, :class:`List`, :class:`Tuple`, :class:`Map`,
:class:`AnyObject`, :class:`Either` (told apart by JSON type) or :class:`Named` (published
once under ``$defs``); closed mappings are in :mod:`spectune.documents.spec_objects`. Each
gives its JSON Schema, loads a parsed value (refusing it with ``file:line: key.path: what
was expected`` through a :class:`~spectune.documents.spec_reading.Reader`) and writes one.

Records are built without dataclass's code generation (:func:`record`): this module loads
on the ``recommend`` cold start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from spectune.base.limits import MAX_COUNT
from spectune.documents.spec_reading import Reader, describe, key_path

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    def record(cls: type) -> type:
        """A frozen dataclass's constructor and repr without its code generation: dataclass
        builds each class with exec (about 0.7 ms a class, 10 ms for the document specs)
        and they load on the ``recommend`` cold start. Type checkers see a dataclass."""
        names = list(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 (own annotations only, as text)
        defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}

        def __init__(self: Any, *args: Any, **kw: Any) -> None:
            if len(args) > len(names):
                raise TypeError(f"{cls.__name__} takes {len(names)} arguments")
            for n, v in zip(names, args, strict=False):
                self.__dict__[n] = v
            for n in names[len(args):]:
                self.__dict__[n] = kw.pop(n) if n in kw else defaults[n]
            if kw:
                raise TypeError(f"{cls.__name__} got unknown arguments {sorted(kw)}")

        def __repr__(self: Any) -> str:
            return f"{cls.__name__}({', '.join(f'{n}={self.__dict__[n]!r}' for n in names)})"

        cls.__init__ = __init__
        cls.__repr__ = __repr__
        return cls


Schema = dict[str, Any]
#: Every loaded number is at most this in magnitude: counts, tokens and seconds beyond 2**53
#: are not exact as floats and would overflow later arithmetic (batch sizes are int64).
MAX_NUMBER = MAX_COUNT


def sig(x: Any, digits: int = 6) -> float:
    """``x`` rounded to ``digits`` significant digits (stable text across platforms)."""
    v = float(x)
    if v == 0 or not math.isfinite(v):
        return 0.0 if v == 0 else v
    return float(f"{v:.{digits}g}")


def num(x: Any, digits: int = 6) -> int | float | None:
    """A count as int when whole, else a float rounded to ``digits`` decimals; non-finite
    values are unknown (None)."""
    if x is None:
        return None
    v = float(x)
    if not math.isfinite(v):
        return None
    if v.is_integer():
        return int(v)
    return round(v, digits)


def _bound(x: float) -> str:
    """A bound for messages: ``10,000,000`` rather than ``1e+07``."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 2**63 else f"{x:g}"



class Spec:
    """A part of a document: its schema, how to load it, how to write it."""

    nullable = False

    def schema(self) -> Schema:
        raise NotImplementedError

    def load(self, v: Any, path: str, r: Reader) -> Any:
        raise NotImplementedError

    def dump(self, v: Any) -> Any:
        return v


@record
class Number(Spec):
    """A finite number of magnitude at most 2**53 within [``minimum``, ``maximum``];
    ``integer``: whole (loaded as int); ``positive``: above 0. Written rounded to ``digits``
    significant digits, or to ``decimals`` decimals (whole values as integers), or as given."""

    integer: bool = False
    minimum: float | None = None
    maximum: float | None = None
    digits: int | None = None
    decimals: int | None = None
    description: str = ""
    positive: bool = False

    def schema(self) -> Schema:
        out: Schema = {"type": "integer" if self.integer else "number"}
        out["minimum"] = -MAX_NUMBER if self.minimum is None else self.minimum
        if self.positive:
            out["exclusiveMinimum"] = 0
        out["maximum"] = MAX_NUMBER if self.maximum is None else self.maximum
        if self.description:
            out["description"] = self.description
        return out

    def load(self, v: Any, path: str, r: Reader) -> int | float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise r.fail(path, f"expected a {'whole ' if self.integer else ''}number, got {describe(v)}")
        x = float(v) if abs(v) <= MAX_NUMBER else math.inf  # a huge int would overflow float()
        if not math.isfinite(x) or abs(x) > MAX_NUMBER:
            raise r.fail(path, f"expected a finite number of magnitude at most 2**53, got {describe(v)}")
        if self.minimum is not None and x < self.minimum:
            raise r.fail(path, f"expected a number >= {_bound(self.minimum)}, got {describe(v)}")
        if self.positive and x <= 0:
            raise r.fail(path, f"expected a number > 0, got {describe(v)}")
        if self.maximum is not None and x > self.maximum:
            raise r.fail(path, f"expected a number <= {_bound(self.maximum)}, got {describe(v)}")
        if self.integer:
            if not x.is_integer():
                raise r.fail(path, f"expected a whole number, got {describe(v)}")
            return int(x)
        return x

    def dump(self, v: Any) -> Any:
        if self.integer:
            return int(v)
        if self.digits is not None:
            return sig(v, self.digits)
        if self.decimals is not None:
            return num(v, self.decimals)
        return v


@record
class Text(Spec):
    description: str = ""

    def schema(self) -> Schema:
        return {"type": "string", **({"description": self.description} if self.description else {})}

    def load(self, v: Any, path: str, r: Reader) -> str:
        if not isinstance(v, str):
            raise r.fail(path, f"expected text, got {describe(v)}")
        return v


@record
class Flag(Spec):
    description: str = ""

    def schema(self) -> Schema:
        return {"type": "boolean", **({"description": self.description} if self.description else {})}

    def load(self, v: Any, path: str, r: Reader) -> bool:
        if not isinstance(v, bool):
            raise r.fail(path, f"expected true or false, got {describe(v)}")
        return v


@record
class Choice(Spec):
    """One of ``values`` (text or numbers)."""

    values: tuple[Any, ...]

    def schema(self) -> Schema:
        return {"enum": list(self.values)}

    def load(self, v: Any, path: str, r: Reader) -> Any:
        if isinstance(v, bool) or v not in self.values:
            hint = ""
            if isinstance(v, str):
                import difflib

                close = difflib.get_close_matches(v, [str(x) for x in self.values], n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
            raise r.fail(path, f"expected one of {', '.join(map(str, self.values))}, got {describe(v)}{hint}")
        return v


@record
class Const(Spec):
    """Exactly ``value`` (the envelope's apiVersion, kind and schema; a discriminator)."""

    value: Any
    hint: str = ""

    def schema(self) -> Schema:
        return {"const": self.value}

    def load(self, v: Any, path: str, r: Reader) -> Any:
        if isinstance(v, bool) != isinstance(self.value, bool) or v != self.value:  # JSON: 1 == 1.0
            raise r.fail(path, f"expected {self.value!r}, got {v!r}{self.hint}")
        return v

    def dump(self, v: Any) -> Any:
        return self.value


@record
class Nullable(Spec):
    inner: Spec
    nullable = True

    def schema(self) -> Schema:
        return {"anyOf": [self.inner.schema(), {"type": "null"}]}

    def load(self, v: Any, path: str, r: Reader) -> Any:
        return None if v is None else self.inner.load(v, path, r)

    def dump(self, v: Any) -> Any:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return None  # a NaN or infinite measurement is unknown
        return self.inner.dump(v)


@record
class List(Spec):
    """A list of ``item``, loaded as a tuple; ``fraction``-style bounds live on the item."""

    item: Spec
    min_items: int = 0
    max_items: int | None = None

    def schema(self) -> Schema:
        out: Schema = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return out

    def load(self, v: Any, path: str, r: Reader) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise r.fail(path, f"expected a list, got {describe(v)}")
        if len(v) < self.min_items:
            raise r.fail(path, f"expected at least {self.min_items} item(s), got {len(v)}")
        if self.max_items is not None and len(v) > self.max_items:
            raise r.fail(path, f"expected at most {self.max_items:,} items, got {len(v):,}")
        return tuple(self.item.load(x, f"{path}[{i}]", r) for i, x in enumerate(v))

    def dump(self, v: Any) -> list[Any]:
        return [self.item.dump(x) for x in v]


@record
class Tuple(Spec):
    """A fixed-length list whose items each have their own spec (loaded as a tuple)."""

    items: tuple[Spec, ...]
    description: str = ""

    def schema(self) -> Schema:
        n = len(self.items)
        out: Schema = {"type": "array", "prefixItems": [i.schema() for i in self.items], "minItems": n,
                       "maxItems": n}
        if self.description:
            out["description"] = self.description
        return out

    def load(self, v: Any, path: str, r: Reader) -> tuple[Any, ...]:
        if not isinstance(v, list) or len(v) != len(self.items):
            raise r.fail(path, f"expected a list of {len(self.items)} items, got {describe(v)}")
        return tuple(s.load(x, f"{path}[{i}]", r) for i, (s, x) in enumerate(zip(self.items, v, strict=True)))

    def dump(self, v: Any) -> list[Any]:
        return [s.dump(x) for s, x in zip(self.items, v, strict=True)]


@record
class Map(Spec):
    """A mapping of free text keys to ``value`` (e.g. Prometheus labels), at least
    ``min_keys`` of them; ``example`` shows one in messages."""

    value: Spec
    description: str = ""
    min_keys: int = 0
    example: str = ""

    def schema(self) -> Schema:
        out: Schema = {"type": "object", "additionalProperties": self.value.schema()}
        if self.min_keys:
            out["minProperties"] = self.min_keys
        if self.description:
            out["description"] = self.description
        return out

    def load(self, v: Any, path: str, r: Reader) -> dict[str, Any]:
        like = f" (e.g. {self.example})" if self.example else ""
        if not isinstance(v, dict):
            raise r.fail(path, f"expected a mapping{like}, got {describe(v)}")
        if len(v) < self.min_keys:
            raise r.fail(path, f"expected at least {self.min_keys} key(s){like}, got {len(v)}")
        return {str(k): self.value.load(x, key_path(path, str(k)), r) for k, x in v.items()}

    def dump(self, v: Any) -> dict[str, Any]:
        return {k: self.value.dump(x) for k, x in v.items()}


@record
class AnyObject(Spec):
    """A mapping passed through as given (an engine's own configuration)."""

    def schema(self) -> Schema:
        return {"type": "object"}

    def load(self, v: Any, path: str, r: Reader) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise r.fail(path, f"expected a mapping, got {describe(v)}")
        return v



_JSON_TYPES = {"string": (str,), "number": (int, float), "integer": (int, float), "object": (dict,),
               "array": (list,), "boolean": (bool,)}


def _takes(spec: Spec, v: Any) -> bool:
    """Whether ``v`` has the JSON type ``spec`` describes (Either's choice of option)."""
    if isinstance(spec, Named):
        return _takes(spec.spec, v)
    if isinstance(spec, (Choice, Const)):
        values = spec.values if isinstance(spec, Choice) else (spec.value,)
        return any(type(x) is type(v) or (isinstance(x, (int, float)) and isinstance(v, (int, float))
                                           and not isinstance(v, bool)) for x in values)
    kind = spec.schema().get("type")
    if isinstance(v, bool):
        return kind == "boolean"
    return isinstance(v, _JSON_TYPES.get(str(kind), ()))


@record
class Either(Spec):
    """One of ``options`` of different JSON types (a built-in name or a mapping; a number or
    a list), picked by the value's type; ``expected`` names them for messages."""

    options: tuple[Spec, ...]
    expected: str
    description: str = ""

    def schema(self) -> Schema:
        out: Schema = {"anyOf": [o.schema() for o in self.options]}
        if self.description:
            out["description"] = self.description
        return out

    def load(self, v: Any, path: str, r: Reader) -> Any:
        for o in self.options:
            if _takes(o, v):
                return o.load(v, path, r)
        raise r.fail(path or "(top)", f"expected {self.expected}, got {describe(v)}")

    def dump(self, v: Any) -> Any:
        return v


@record
class Named(Spec):
    """``spec`` published once under ``$defs/name`` of its kind's schema and referred to
    from each place it is used (a built-in profile's mapping: one definition an editor can
    validate a built-in file with)."""

    name: str
    spec: Spec

    def schema(self) -> Schema:
        return {"$ref": f"#/$defs/{self.name}"}

    def load(self, v: Any, path: str, r: Reader) -> Any:
        return self.spec.load(v, path, r)

    def dump(self, v: Any) -> Any:
        return self.spec.dump(v)

