"""Kind ``ProfileList`` (``spectune profiles list``): the built-in profiles and the shipped
examples, one row each. Written by :func:`spectune.api.list_profiles`."""

from __future__ import annotations

from spectune.documents.docspec import Choice, Field, Kind, List, Obj, Text

# The kinds of built-in profile (spectune/_profiles/<kind>/) and the shipped examples.
PROFILE_KINDS = ("gpus", "models", "drafters", "engines", "examples")

PROFILE_LIST = Kind("ProfileList", "spectune profiles list", "built-in profiles and shipped examples", Obj((
    Field("profiles", List(Obj((Field("kind", Choice(PROFILE_KINDS)),
                                Field("name", Text()), Field("description", Text()))))),
)))
