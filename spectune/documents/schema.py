"""The registry of document kinds: every machine-readable document spectune prints, and its
JSON Schema (draft 2020-12).

Each kind is defined once, with the code that writes it (and reads it back), as a
:class:`spectune.documents.docspec.Kind`: its schema, its validation on load and its serialisation
all come from that one definition. This module only assembles them. ``spectune schema``
lists the kinds, ``spectune schema KIND`` prints one schema; fields are described (with
units) in docs/schema.md. Every schema is closed (no unknown keys), and a document cannot
be written with a key its definition does not describe.

Profile (:mod:`spectune.documents.profile_spec`) and FleetFile
(:mod:`spectune.documents.fleet_file`) are the inputs a user writes rather than spectune:
their apiVersion and kind are optional. Every kind is defined under spectune/documents/; the
code that builds a document (the API, the fleet, the CI gate, the Prometheus observer)
imports its definition from there, so this registry imports nothing above the documents.
"""

from __future__ import annotations

from typing import Any

from spectune.base.errors import InputError
from spectune.documents.calibration import CALIBRATION
from spectune.documents.check_report import CHECK_REPORT, CHECK_SET
from spectune.documents.docspec import Kind
from spectune.documents.fleet_documents import FLEET, FLEET_REPORT
from spectune.documents.fleet_file import FLEET_FILE
from spectune.documents.observation import OBSERVATION
from spectune.documents.profile_list import PROFILE_LIST
from spectune.documents.profile_spec import PROFILE
from spectune.documents.results import (
    RECOMMENDATION,
    SPEEDUP,
    STEP_COST,
    STEP_COST_SWEEP,
    WIDTH_DEPTH,
)

Schema = dict[str, Any]

KINDS: tuple[Kind, ...] = (RECOMMENDATION, STEP_COST, STEP_COST_SWEEP, SPEEDUP, PROFILE_LIST, CHECK_REPORT,
                           OBSERVATION, WIDTH_DEPTH, FLEET, FLEET_REPORT, CHECK_SET, CALIBRATION, PROFILE,
                           FLEET_FILE)
SCHEMAS: dict[str, Schema] = {k.name: k.schema() for k in KINDS}


def kinds() -> dict[str, str]:
    """Every documented kind and its description (the command that prints it, and what it is)."""
    return {kind: schema["description"] for kind, schema in SCHEMAS.items()}


def schema_for(kind: str) -> Schema:
    """The JSON Schema of ``kind`` (case-insensitive); InputError for an unknown kind."""
    for name, schema in SCHEMAS.items():
        if name.lower() == kind.lower():
            return schema
    import difflib  # only for a suggestion: off the start-up path

    close = difflib.get_close_matches(kind, list(SCHEMAS), n=2, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InputError(f"unknown document kind {kind!r}{hint} (kinds: {', '.join(SCHEMAS)})")
