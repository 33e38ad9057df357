"""JSON Schemas (draft 2020-12) of every machine-readable document spectune prints.

``spectune schema`` lists the kinds, ``spectune schema KIND`` prints one schema. Each
document is a versioned envelope: ``apiVersion: spectune/v1`` and ``kind``; fields are
described (with units) in docs/schema.md. The schemas are closed (no unknown keys), so a
field added to a document without documenting it here fails the schema tests.
"""

from __future__ import annotations

import difflib
from typing import Any

from spectune.calibration import CALIBRATION as _CALIBRATION
from spectune.documents import RECOMMENDATION as _RECOMMENDATION
from spectune.documents import SPEEDUP as _SPEEDUP
from spectune.documents import STEP_COST as _STEP_COST
from spectune.documents import STEP_COST_SWEEP as _STEP_COST_SWEEP
from spectune.documents import WIDTH_DEPTH as _WIDTH_DEPTH
from spectune.envelope import API_VERSION
from spectune.errors import InputError
from spectune.fleet import FLEET_REPORT as _FLEET_REPORT
from spectune.observe.observation import OBSERVATION as _OBSERVATION
from spectune.observe.prometheus import FLEET as _FLEET

Schema = dict[str, Any]
DIALECT = "https://json-schema.org/draft/2020-12/schema"

NUM: Schema = {"type": "number"}
INT: Schema = {"type": "integer"}
NONNEG_INT: Schema = {"type": "integer", "minimum": 0}
POS_INT: Schema = {"type": "integer", "minimum": 1}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
FRACTION: Schema = {"type": "number", "minimum": 0, "maximum": 1}


def _nullable(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


def _obj(props: dict[str, Schema], required: list[str] | None = None, description: str = "") -> Schema:
    out: Schema = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = props
    out["required"] = list(props) if required is None else required
    out["additionalProperties"] = False
    return out


def _arr(items: Schema, min_items: int = 0) -> Schema:
    out: Schema = {"type": "array", "items": items}
    if min_items:
        out["minItems"] = min_items
    return out


def _doc(kind: str, command: str, description: str, props: dict[str, Schema],
         required: list[str] | None = None) -> Schema:
    """A document's schema; its ``description`` names the command that prints it (what
    ``spectune schema`` lists)."""
    description = f"{command} -o yaml|json: {description}"
    body = {"apiVersion": {"const": API_VERSION}, "kind": {"const": kind}, **props}
    req = ["apiVersion", "kind", *(list(props) if required is None else required)]
    return {"$schema": DIALECT, "$id": f"urn:spectune:schema:v1:{kind}", "title": kind,
            **_obj(body, req, description)}


METADATA = _obj({"spectune": STR, "schema": STR})
PARALLELISM = _obj({"tp": POS_INT, "ep": POS_INT, "dp": POS_INT})

RECOMMENDATION = _RECOMMENDATION.schema()

STEP_COST = _STEP_COST.schema()
STEP_COST_SWEEP = _STEP_COST_SWEEP.schema()
SPEEDUP = _SPEEDUP.schema()

PROFILE_LIST = _doc("ProfileList", "spectune profiles list", "built-in profiles and shipped examples", {
    "profiles": _arr(_obj({"kind": {"enum": ["gpus", "models", "drafters", "engines", "examples"]},
                           "name": STR, "description": STR})),
})

_RANGE = {"type": "array", "prefixItems": [POS_INT, POS_INT, NONNEG_INT], "minItems": 3,
          "maxItems": 3, "description": "[first batch size, last batch size, gamma], inclusive"}
CHECK_REPORT = _doc("CheckReport", "spectune check",
                    "a serving configuration's speculation against the recommended settings", {
    "metadata": METADATA,
    "verdict": {"enum": ["pass", "fail"]},
    "exit_code": {"enum": [0, 1]},
    "tolerance": FRACTION,
    "summary": STR,
    "config": _obj({
        "file": STR,
        "format": {"enum": ["vllm-config-file", "command-line", "kubernetes"]},
        "line": _nullable(POS_INT),
        "engine": {"enum": ["vllm", "sglang"]},
        "method": _nullable(STR),
        "model": _nullable(STR),
        "speculate": BOOL,
        "num_speculative_tokens": _nullable(POS_INT),
        "schedule": _nullable(_arr(_RANGE, 1)),
        "schedule_active": BOOL,
        "data_parallel_size": POS_INT,
        "sglang": _nullable(_obj({
            "num_steps": _nullable(NONNEG_INT), "eagle_topk": _nullable(POS_INT),
            "num_draft_tokens": _nullable(POS_INT), "adaptive": BOOL,
            "adaptive_config": _nullable(STR)})),
    }),
    "profile": _obj({
        "name": STR, "model": STR,
        "drafter": _obj({"kind": STR, "name": STR, "path": _nullable(STR)}),
        "engine": STR, "gamma_max": POS_INT,
    }),
    "points": _arr(_obj({
        "batch": POS_INT, "context": NONNEG_INT,
        "configured_gamma": NONNEG_INT, "configured_speedup": NUM,
        "recommended_gamma": NONNEG_INT, "recommended_speedup": NUM,
        "unconstrained_gamma": NONNEG_INT, "unconstrained_speedup": NUM,
        "shortfall": NUM, "slows_down": BOOL, "feasible": BOOL, "ok": BOOL,
        "plain_tokens_per_s": NUM, "configured_tokens_per_s": NUM, "recommended_tokens_per_s": NUM,
    }), 1),
    "failing_points": NONNEG_INT,
    "worst": _obj({"batch": POS_INT, "context": NONNEG_INT, "shortfall": NUM}),
    "warnings": _arr(STR),
    "fix": _nullable(_obj({
        "engine": {"enum": ["vllm", "sglang"]},
        "format": {"enum": ["vllm-config-file", "command-line"]},
        "snippet": STR,
        "adaptive_config": STR,
        "max_shortfall": NUM,
    }, required=["engine", "format", "snippet", "max_shortfall"])),
    "notes": _arr(STR),
})

OBSERVATION = _OBSERVATION.schema()
CALIBRATION = _CALIBRATION.schema()

FLEET = _FLEET.schema()

FLEET_REPORT = _FLEET_REPORT.schema()

CHECK_SET = _doc("CheckSet", "spectune check DIR --profiles MAP",
                 "every manifest of a directory checked against its profile", {
    "verdict": {"enum": ["pass", "fail"]},
    "summary": STR,
    "checks": _arr(_obj({"manifest": STR, "profile": STR,
                         "report": {k: v for k, v in CHECK_REPORT.items() if k not in ("$schema", "$id")}})),
})

WIDTH_DEPTH = _WIDTH_DEPTH.schema()

SCHEMAS: dict[str, Schema] = {s["title"]: s for s in (
    RECOMMENDATION, STEP_COST, STEP_COST_SWEEP, SPEEDUP, PROFILE_LIST, CHECK_REPORT, OBSERVATION,
    WIDTH_DEPTH, FLEET, FLEET_REPORT, CHECK_SET, CALIBRATION)}


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
