"""One definition per document kind: its JSON Schema, its validation on load and its
serialisation all come from the same tree of specs.

A kind is a :class:`Kind` (name, the command that prints it, a closed :class:`Obj` body);
its parts are :class:`Number`, :class:`Text`, :class:`Flag`, :class:`Choice`,
:class:`Const`, :class:`List`, :class:`Tuple`, :class:`Obj`, :class:`Map`, :class:`AnyObject`,
:class:`OneOf`, :class:`Either` (told apart by JSON type: a built-in name or a mapping) and
:class:`Nullable`; an :class:`Obj` may carry :class:`Rule` s (keys required together or
exclusively, or by the value of another key). From it:

* :meth:`Kind.schema` -- the JSON Schema (draft 2020-12): closed objects, the bounds the
  loader enforces, descriptions with units;
* :meth:`Kind.load` -- a parsed YAML/JSON mapping validated against the same tree, with
  ``file:line: key.path: what was expected`` on the first problem (unknown keys refused,
  the closest known key suggested), built into the kind's dataclasses (``Obj.build``);
* :meth:`Kind.dump` -- a dataclass (or plain mapping) written as the document: keys in
  spec order, floats rounded per field (``digits`` significant, or ``decimals`` with whole
  numbers as integers), nothing the spec does not describe.

Hand-written by choice: pydantic costs ~80 ms of import on the ``recommend`` cold start
(goal 0.35 s), jsonschema as the validator ~60 ms, msgspec would be a new compiled
dependency; none names the YAML line of a bad key, and the messages here are the ones the
profile loader already gives. This module imports only ``math`` (``difflib`` and ``yaml``
when needed) and builds its records without dataclass's code generation (:func:`record`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from spectune.documents.envelope import API_VERSION
from spectune.errors import InputError
from spectune.limits import MAX_COUNT

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    def record(cls: type) -> type:
        """A frozen dataclass's constructor and repr without its code generation: dataclass
        builds each class with exec (about 0.7 ms a class, 10 ms for this module) and this
        module loads on the ``recommend`` cold start. Type checkers see a dataclass."""
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
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Every loaded number is at most this in magnitude: counts, tokens and seconds beyond 2**53
#: are not exact as floats and would overflow later arithmetic (batch sizes are int64).
MAX_NUMBER = MAX_COUNT


def describe(v: Any) -> str:
    """A value's kind for messages, without echoing a whole (possibly huge) structure."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({str(v).lower()})"
    if isinstance(v, (int, float, str)):
        from spectune.documents.inputs import short

        return short(v)
    return {"dict": "a mapping", "list": "a list"}.get(type(v).__name__, type(v).__name__)


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


# --------------------------------------------------------------------------- loading context
class Reader:
    """Where a document came from, for messages: ``where`` (file name), ``lines`` (key path
    ``a.b[0].c`` -> line, from :func:`key_lines`) and the exception to raise (given the whole
    message; an InputError without it)."""

    def __init__(self, where: str, lines: Mapping[str, int] | None = None,
                 error: Callable[[str], Exception] | None = None) -> None:
        self.where, self.lines, self.error = where, lines or {}, error

    def fail(self, path: str, msg: str) -> Exception:
        """``file:line: key.path: msg``; the line of the nearest enclosing key that has one."""
        at = path
        while at and at not in self.lines:
            at = at.rsplit("[", 1)[0] if at.endswith("]") else at.rpartition(".")[0]
        line = self.lines.get(at)
        if self.error is None:
            return InputError(msg, self.where, line, path or None)
        return self.error(f"{self.where}{f':{line}' if line else ''}: {path}: {msg}")


def _bound(x: float) -> str:
    """A bound for messages: ``10,000,000`` rather than ``1e+07``."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 2**63 else f"{x:g}"


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --------------------------------------------------------------------------- specs
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
    """A mapping of free text keys to ``value`` (e.g. Prometheus labels)."""

    value: Spec
    description: str = ""

    def schema(self) -> Schema:
        out: Schema = {"type": "object", "additionalProperties": self.value.schema()}
        if self.description:
            out["description"] = self.description
        return out

    def load(self, v: Any, path: str, r: Reader) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise r.fail(path, f"expected a mapping, got {describe(v)}")
        return {str(k): self.value.load(x, _at(path, str(k)), r) for k, x in v.items()}

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


@record
class Field:
    """One key: its ``spec``; ``required`` on load (an optional nullable field is still
    written, as null; an optional other field is left out when None or empty); ``attr``:
    the attribute of the built object when it is not named like the key."""

    name: str
    spec: Spec
    required: bool = True
    attr: str = ""


@record
class Rule:
    """A condition on an object's keys beyond each key's own spec: ``schema`` is its JSON
    Schema (one entry of the object's ``allOf``), ``check`` the same condition for the loader,
    given the mapping: None, or the key (empty: the object itself) and what is wrong."""

    schema: Schema
    check: Callable[[Mapping[str, Any]], tuple[str, str] | None]


def one_of_keys(keys: tuple[str, ...], what: str, exactly: bool = True) -> Rule:
    """Exactly one (or, without ``exactly``, at least one) of ``keys``; ``what`` explains them."""

    def check(v: Mapping[str, Any]) -> tuple[str, str] | None:
        given = [k for k in keys if k in v]
        if not given or (exactly and len(given) > 1):
            return "", f"expected {'exactly' if exactly else 'at least'} one of {what}; got {given or 'none'}"
        return None

    options = [{"required": [k]} for k in keys]
    return Rule({"oneOf" if exactly else "anyOf": options}, check)


def needs(key: str, value: Any, then: tuple[str, ...], why: str) -> Rule:
    """When ``key`` is given and is ``value`` (any value when ``value`` is None), at least one
    of ``then`` is required; ``why`` says so."""

    def check(v: Mapping[str, Any]) -> tuple[str, str] | None:
        if key in v and (value is None or v[key] == value) and not any(k in v for k in then):
            return (then[0] if len(then) == 1 else ""), f"missing: {why}"
        return None

    cond: Schema = {"required": [key]}
    if value is not None:
        cond["properties"] = {key: {"const": value}}
    need: Schema = {"anyOf": [{"required": [k]} for k in then]}
    return Rule({"if": cond, "then": need}, check)


def all_of_keys(keys: tuple[str, ...], unless: str, why: str) -> Rule:
    """Every one of ``keys`` is required unless ``unless`` is given."""

    def check(v: Mapping[str, Any]) -> tuple[str, str] | None:
        if unless not in v:
            for k in keys:
                if k not in v:
                    return k, f"missing ({why})"
        return None

    return Rule({"anyOf": [{"required": [unless]}, {"required": list(keys)}]}, check)


def only_if(keys: tuple[str, ...], when: Schema, holds: Callable[[Mapping[str, Any]], bool],
            why: str) -> Rule:
    """Each of ``keys`` only in an object matching ``when`` (its JSON Schema; ``holds`` is
    the same test for the loader); ``why`` says so, at the first such key given."""

    def check(v: Mapping[str, Any]) -> tuple[str, str] | None:
        given = [k for k in keys if k in v]
        return (given[0], why) if given and not holds(v) else None

    return Rule({"allOf": [{"if": {"required": [k]}, "then": when} for k in keys]}, check)


def not_together(a: str, b: str) -> Rule:
    def check(v: Mapping[str, Any]) -> tuple[str, str] | None:
        return (b, f"give either {a!r} or {b!r}, not both") if a in v and b in v else None

    return Rule({"not": {"required": [a, b]}}, check)


@record
class Obj(Spec):
    """A closed mapping of ``fields`` (in document order). ``build`` makes the loaded object
    from keyword arguments named by attribute (a dict without it); ``parts`` gives an
    object's values by key for writing (attributes, or the mapping itself, without it)."""

    fields: tuple[Field, ...]
    description: str = ""
    build: Callable[..., Any] | None = None
    parts: Callable[[Any], Mapping[str, Any]] | None = None
    rules: tuple[Rule, ...] = ()

    def schema(self) -> Schema:
        out: Schema = {"type": "object"}
        if self.description:
            out["description"] = self.description
        out["properties"] = {f.name: f.spec.schema() for f in self.fields}
        out["required"] = [f.name for f in self.fields if f.required]
        out["additionalProperties"] = False
        if self.rules:
            out["allOf"] = [r.schema for r in self.rules]
        return out

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def load(self, v: Any, path: str, r: Reader) -> Any:
        if not isinstance(v, dict):
            raise r.fail(path or "(top)", f"expected a mapping, got {describe(v)}")
        known = self.names()
        for k in v:
            if k not in known:
                import difflib

                close = difflib.get_close_matches(str(k), known, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
                raise r.fail(_at(path, str(k)), f"unknown key {describe(str(k))}{hint}")
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name not in v:
                if f.required:
                    raise r.fail(_at(path, f.name), "missing (a required key)")
                continue
            value = v[f.name]
            loaded = f.spec.load(value, _at(path, f.name), r)
            if self.build is None:
                out[f.name] = loaded
            elif not isinstance(f.spec, Const):
                out[f.attr or f.name] = loaded
        for rule in self.rules:
            problem = rule.check(v)
            if problem is not None:
                raise r.fail((_at(path, problem[0]) if problem[0] else path) or "(top)", problem[1])
        return out if self.build is None else self.build(**out)

    def dump(self, v: Any) -> dict[str, Any]:
        if self.parts is not None:
            values: Mapping[str, Any] = self.parts(v)
        elif isinstance(v, Mapping):
            values = v
            extra = set(v) - set(self.names())
            if extra:
                raise ValueError(f"keys {sorted(extra)} are not in the document's spec")
        else:
            values = {f.name: getattr(v, f.attr or f.name) for f in self.fields
                      if not isinstance(f.spec, Const)}
        out: dict[str, Any] = {}
        for f in self.fields:
            if isinstance(f.spec, Const):
                out[f.name] = f.spec.value
                continue
            x = values.get(f.name)
            empty = x is None or (isinstance(x, (list, tuple, dict)) and not x)
            if empty and not f.required and not f.spec.nullable:
                continue
            if x is None and not f.spec.nullable:
                raise ValueError(f"{f.name}: required and not nullable, got None")
            out[f.name] = f.spec.dump(x)
        return out


@record
class OneOf(Spec):
    """One of several mappings told apart by the constant at ``key`` (``feasible``)."""

    options: tuple[Obj, ...]
    key: str

    def _pick(self, v: Any) -> Obj | None:
        for o in self.options:
            spec = next(f.spec for f in o.fields if f.name == self.key)
            if isinstance(spec, Const) and isinstance(v, Mapping) and v.get(self.key) == spec.value:
                return o
        return None

    def schema(self) -> Schema:
        return {"oneOf": [o.schema() for o in self.options]}

    def load(self, v: Any, path: str, r: Reader) -> Any:
        o = self._pick(v)
        if o is None:
            raise r.fail(_at(path, self.key), "expected one of the documented shapes")
        return o.load(v, path, r)

    def dump(self, v: Any) -> Any:
        o = self._pick(v)
        if o is None:
            raise ValueError(f"no shape of this spec matches {self.key}={v.get(self.key)!r}")
        return o.dump(v)


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


def _parts(spec: Any) -> list[Spec]:
    """The specs directly inside ``spec`` (its fields', items', options')."""
    out: list[Spec] = []
    for v in spec.__dict__.values():
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, Field):
                x = x.spec
            if isinstance(x, Spec):
                out.append(x)
    return out


def named_defs(spec: Spec, out: dict[str, Schema] | None = None) -> dict[str, Schema]:
    """``$defs`` of every :class:`Named` spec inside ``spec``, by name."""
    out = {} if out is None else out
    for part in _parts(spec):
        if isinstance(part, Named) and part.name not in out:
            out[part.name] = part.spec.schema()
        named_defs(part, out)
    return out


# --------------------------------------------------------------------------- kinds
@record
class Kind:
    """A versioned document: ``apiVersion``, ``kind``, (``schema`` when ``version``), then
    ``body``'s fields. ``command`` prints it; ``make`` tells a user how to make one."""

    name: str
    command: str
    description: str
    body: Obj
    version: int | None = None
    make: str = ""
    written_by_user: bool = False

    @property
    def obj(self) -> Obj:
        hint = f" (make one with `{self.make}`)" if self.make else ""
        # A document a user writes (a profile) may, not must, name its apiVersion and kind.
        need = not self.written_by_user
        head = [Field("apiVersion", Const(API_VERSION), need), Field("kind", Const(self.name, hint), need)]
        if self.version is not None:
            head.append(Field("schema", Const(self.version)))
        return Obj((*head, *self.body.fields), build=self.body.build, parts=self.body.parts,
                   rules=self.body.rules)

    def schema(self) -> Schema:
        body = self.obj.schema()
        how = "" if self.written_by_user else " -o yaml|json"
        body["description"] = f"{self.command}{how}: {self.description}"
        defs = named_defs(self.body)
        return {"$schema": DIALECT, "$id": f"urn:spectune:schema:v1:{self.name}", "title": self.name,
                **{k: body[k] for k in ("type", "description", "properties", "required",
                                        "additionalProperties", "allOf") if k in body},
                **({"$defs": defs} if defs else {})}

    def load(self, doc: Any, r: Reader) -> Any:
        """Validate ``doc`` and build it; the envelope is checked first, so another kind of
        document is named as such rather than by its first unknown key."""
        if not isinstance(doc, dict):
            make = f", made by `{self.make}`" if self.make else ""
            raise r.fail("(top)", f"expected a mapping (a {self.name} document{make}), got {describe(doc)}")
        obj = self.obj
        for f in obj.fields[: 3 if self.version is not None else 2]:
            if self.written_by_user and f.name not in doc:
                continue
            if f.name == "schema" and doc.get("schema") != self.version:
                raise r.fail("schema", f"this spectune reads {self.name} schema {self.version}, "
                                       f"got {doc.get('schema')!r}")
            f.spec.load(doc.get(f.name), f.name, r)
        return obj.load(doc, "", r)

    def dump(self, value: Any) -> dict[str, Any]:
        return self.obj.dump(value)


# --------------------------------------------------------------------------- reading
def key_lines(node: Any, path: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """The line of every key path (``a.b[0].c``) of a YAML node, for error messages."""
    import yaml

    if out is None:
        out = {} if node is None else {"": node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            sub = f"{path}.{k.value}" if path else str(k.value)
            out[sub] = k.start_mark.line + 1
            key_lines(v, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[f"{path}[{i}]"] = v.start_mark.line + 1
            key_lines(v, f"{path}[{i}]", out)
    return out


def parse_document(text: str, name: str) -> tuple[Any, dict[str, int]]:
    """The parsed YAML or JSON document of ``text`` and the line of each key path (YAML
    only; empty for JSON). InputError naming ``name`` when it is neither."""
    from spectune.documents.inputs import JsonProblem, parse_json, yaml_document

    if text.lstrip().startswith("{"):
        # JSON first: YAML 1.1 reads an exponent without a dot (json's 1e-06) as text.
        # Anything JSON refuses is read as YAML, bounded the same way ({a: 1} is YAML).
        try:
            return parse_json(text), {}
        except JsonProblem:
            pass
    doc, node = yaml_document(text, name)
    return doc, key_lines(node)
