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
profile loader already gives. These modules import only ``math`` (``difflib`` and ``yaml``
when needed) and build their records without dataclass's code generation
(:func:`~spectune.documents.spec_values.record`).

Where each part lives: the value specs in :mod:`spectune.documents.spec_values`, closed
mappings and their rules in :mod:`spectune.documents.spec_objects`, reading with
``file:line: key`` errors in :mod:`spectune.documents.spec_reading`; :class:`Kind` and the
JSON Schema of a kind here. A document definition imports the whole vocabulary from here (a
duration a user types: :class:`spectune.documents.durations.Duration`).
"""

from __future__ import annotations

from typing import Any

from spectune.documents.envelope import API_VERSION
from spectune.documents.spec_objects import (
    Field,
    Obj,
    OneOf,
    Rule,
    all_of_keys,
    needs,
    not_together,
    one_of_keys,
    only_if,
)
from spectune.documents.spec_reading import Reader, describe, key_lines, parse_document
from spectune.documents.spec_values import (
    MAX_NUMBER,
    AnyObject,
    Choice,
    Const,
    Either,
    Flag,
    List,
    Map,
    Named,
    Nullable,
    Number,
    Schema,
    Spec,
    Text,
    Tuple,
    num,
    record,
    sig,
)

__all__ = [
    "DIALECT",
    "MAX_NUMBER",
    "SCHEMA_PAGE",
    "AnyObject",
    "Choice",
    "Const",
    "Either",
    "Field",
    "Flag",
    "Kind",
    "List",
    "Map",
    "Named",
    "Nullable",
    "Number",
    "Obj",
    "OneOf",
    "Reader",
    "Rule",
    "Schema",
    "Spec",
    "Text",
    "Tuple",
    "all_of_keys",
    "describe",
    "key_lines",
    "named_defs",
    "needs",
    "not_together",
    "num",
    "one_of_keys",
    "only_if",
    "parse_document",
    "sig",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: The page that documents every kind, a section each (``docs/schema.md#<kind>``).
SCHEMA_PAGE = "docs/schema.md"


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
    def page(self) -> str:
        """Where :data:`SCHEMA_PAGE` documents this kind (a document's ``metadata.schema``)."""
        return f"{SCHEMA_PAGE}#{self.name.lower()}"

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

