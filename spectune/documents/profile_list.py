"""The ``ProfileList`` document (``spectune profiles list``): the built-in profiles, by kind
(the folders of ``profiles/``), and the shipped examples; defined once
(:mod:`spectune.documents.docspec`), built by :func:`spectune.api.list_profiles`."""

from __future__ import annotations

from spectune.documents.docspec import Choice, Field, Kind, List, Obj, Text

#: The kinds of built-in profile, each a folder of ``profiles/``.
KINDS = ("gpus", "models", "drafters", "engines")
#: What ``spectune profiles list`` lists: the built-in kinds and the shipped examples.
LISTED = (*KINDS, "examples")

PROFILE_LIST = Kind("ProfileList", "spectune profiles list", "built-in profiles and shipped examples", Obj((
    Field("profiles", List(Obj((Field("kind", Choice(LISTED)), Field("name", Text()),
                                Field("description", Text()))))),
)))
