"""Closed mappings of a document definition (:mod:`spectune.documents.docspec`): an
:class:`Obj` is its :class:`Field` s in document order, plus :class:`Rule` s on its keys
beyond each key's own spec (keys required together, exclusively, or by the value of another
key: :func:`one_of_keys`, :func:`needs`, :func:`all_of_keys`, :func:`only_if`,
:func:`not_together`); a :class:`OneOf` is one of several, told apart by a constant key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spectune.documents.spec_reading import Reader, describe, key_path
from spectune.documents.spec_values import Const, Schema, Spec, record


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
                raise r.fail(key_path(path, str(k)), f"unknown key {describe(str(k))}{hint}")
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name not in v:
                if f.required:
                    raise r.fail(key_path(path, f.name), "missing (a required key)")
                continue
            value = v[f.name]
            loaded = f.spec.load(value, key_path(path, f.name), r)
            if self.build is None:
                out[f.name] = loaded
            elif not isinstance(f.spec, Const):
                out[f.attr or f.name] = loaded
        for rule in self.rules:
            problem = rule.check(v)
            if problem is not None:
                raise r.fail((key_path(path, problem[0]) if problem[0] else path) or "(top)", problem[1])
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
            raise r.fail(key_path(path, self.key), "expected one of the documented shapes")
        return o.load(v, path, r)

    def dump(self, v: Any) -> Any:
        o = self._pick(v)
        if o is None:
            raise ValueError(f"no shape of this spec matches {self.key}={v.get(self.key)!r}")
        return o.dump(v)

