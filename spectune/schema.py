"""The registry of document kinds: every machine-readable document spectune prints, and its
JSON Schema (draft 2020-12).

Each kind is defined once, with the code that writes it (and reads it back), as a
:class:`spectune.docspec.Kind`: its schema, its validation on load and its serialisation
all come from that one definition. This module only assembles them. ``spectune schema``
lists the kinds, ``spectune schema KIND`` prints one schema; fields are described (with
units) in docs/schema.md. Every schema is closed (no unknown keys), and a document cannot
be written with a key its definition does not describe.

CheckReport and CheckSet are defined here for now: ``spectune/check.py`` is being split
(the engines work); their definitions move next to the code that builds them then.
"""

from __future__ import annotations

import difflib
from typing import Any

from spectune.api import PROFILE_LIST
from spectune.calibration import CALIBRATION
from spectune.docspec import Choice, Field, Flag, Kind, List, Nullable, Number, Obj, Text, Tuple
from spectune.documents import (
    METADATA,
    RECOMMENDATION,
    SPEEDUP,
    STEP_COST,
    STEP_COST_SWEEP,
    WIDTH_DEPTH,
)
from spectune.errors import InputError
from spectune.fleet import FLEET_REPORT
from spectune.observe.observation import OBSERVATION
from spectune.observe.prometheus import FLEET

Schema = dict[str, Any]

_NAT = Number(integer=True, minimum=0)
_POS = Number(integer=True, minimum=1)
_ENGINES = Choice(("vllm", "sglang"))

CHECK_REPORT = Kind("CheckReport", "spectune check",
                    "a serving configuration's speculation against the recommended settings", Obj((
    Field("metadata", METADATA),
    Field("verdict", Choice(("pass", "fail"))),
    Field("exit_code", Choice((0, 1))),
    Field("tolerance", Number(minimum=0, maximum=1)),
    Field("summary", Text()),
    Field("config", Obj((
        Field("file", Text()),
        Field("format", Choice(("vllm-config-file", "command-line", "kubernetes"))),
        Field("line", Nullable(_POS)), Field("engine", _ENGINES),
        Field("method", Nullable(Text())), Field("model", Nullable(Text())), Field("speculate", Flag()),
        Field("num_speculative_tokens", Nullable(_POS)),
        Field("schedule", Nullable(List(Tuple((_POS, _POS, _NAT), "[first batch size, last batch size, "
                                                                  "gamma], inclusive"), 1))),
        Field("schedule_active", Flag()), Field("data_parallel_size", _POS),
        Field("sglang", Nullable(Obj((
            Field("num_steps", Nullable(_NAT)), Field("eagle_topk", Nullable(_POS)),
            Field("num_draft_tokens", Nullable(_POS)), Field("adaptive", Flag()),
            Field("adaptive_config", Nullable(Text())))))),
    ))),
    Field("profile", Obj((
        Field("name", Text()), Field("model", Text()),
        Field("drafter", Obj((Field("kind", Text()), Field("name", Text()),
                              Field("path", Nullable(Text()))))),
        Field("engine", Text()), Field("gamma_max", _POS)))),
    Field("points", List(Obj((
        Field("batch", _POS), Field("context", _NAT),
        Field("configured_gamma", _NAT), Field("configured_speedup", Number()),
        Field("recommended_gamma", _NAT), Field("recommended_speedup", Number()),
        Field("unconstrained_gamma", _NAT), Field("unconstrained_speedup", Number()),
        Field("shortfall", Number()), Field("slows_down", Flag()), Field("feasible", Flag()),
        Field("ok", Flag()),
        *(Field(k, Number()) for k in ("plain_tokens_per_s", "configured_tokens_per_s",
                                       "recommended_tokens_per_s")))), 1)),
    Field("failing_points", _NAT),
    Field("worst", Obj((Field("batch", _POS), Field("context", _NAT), Field("shortfall", Number())))),
    Field("warnings", List(Text())),
    Field("fix", Nullable(Obj((
        Field("engine", _ENGINES), Field("format", Choice(("vllm-config-file", "command-line"))),
        Field("snippet", Text()), Field("adaptive_config", Text(), required=False),
        Field("max_shortfall", Number()))))),
    Field("notes", List(Text())),
)))

CHECK_SET = Kind("CheckSet", "spectune check DIR --profiles MAP",
                 "every manifest of a directory checked against its profile", Obj((
    Field("verdict", Choice(("pass", "fail"))),
    Field("summary", Text()),
    Field("checks", List(Obj((Field("manifest", Text()), Field("profile", Text()),
                              Field("report", CHECK_REPORT.obj))))),
)))

KINDS: tuple[Kind, ...] = (RECOMMENDATION, STEP_COST, STEP_COST_SWEEP, SPEEDUP, PROFILE_LIST, CHECK_REPORT,
                           OBSERVATION, WIDTH_DEPTH, FLEET, FLEET_REPORT, CHECK_SET, CALIBRATION)
SCHEMAS: dict[str, Schema] = {k.name: k.schema() for k in KINDS}


def kinds() -> dict[str, str]:
    """Every documented kind and its description (the command that prints it, and what it is)."""
    return {kind: schema["description"] for kind, schema in SCHEMAS.items()}


def schema_for(kind: str) -> Schema:
    """The JSON Schema of ``kind`` (case-insensitive); InputError for an unknown kind."""
    for name, schema in SCHEMAS.items():
        if name.lower() == kind.lower():
            return schema
    close = difflib.get_close_matches(kind, list(SCHEMAS), n=2, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InputError(f"unknown document kind {kind!r}{hint} (kinds: {', '.join(SCHEMAS)})")
