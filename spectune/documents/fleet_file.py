"""The fleet file (``spectune fleet FLEET.yaml``, ``spectune rules FLEET.yaml``): where
Prometheus is, how its series are grouped, and each deployment's profile. Defined once as
a document kind (:data:`FLEET_FILE`, ``spectune schema FleetFile``): unknown keys, types and
missing keys are refused with ``file:line: key.path: what was expected`` (exit 2), as in
every other document; read here, without the command line, so the library
(:func:`spectune.rules`) reads it too. Like a profile, it is written by a user: it may
start with ``apiVersion: spectune/v1`` and ``kind: FleetFile``, and need not.

A fleet file::

    prometheus: http://prometheus.monitoring:9090   # --prometheus overrides
    window: 1h                                       # --window overrides
    selector: '{namespace="prod"}'                   # optional
    by: [deployment]                                 # grouping labels besides model_name
    deployments:
      - match: {deployment: chat}                    # the group(s) this entry covers
        profile: profiles/chat.yaml                  # file (relative to FLEET.yaml) or shipped name
        config: deploy/chat.yaml                     # optional: serving config, for the current gamma
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from spectune.base.limits import MAX_WINDOW_SECONDS, MIN_WINDOW_SECONDS
from spectune.documents.docspec import Either, Field, Kind, List, Map, Nullable, Number, Obj, Reader, Text
from spectune.documents.durations import Duration

FLEET_FILE = Kind("FleetFile", "spectune fleet|rules FLEET.yaml",
                  "where Prometheus is, how its series are grouped, and each deployment's profile", Obj((
    Field("prometheus", Nullable(Text("the Prometheus base URL (--prometheus overrides)")), required=False),
    Field("window", Nullable(Duration(MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS,
                                      "the window observed, seconds: a number, or text such as 90, 20s, "
                                      "5m, 1h (--window overrides)")), required=False),
    Field("selector", Nullable(Text("label matchers every series must satisfy, e.g. "
                                    "'{namespace=\"prod\"}'")), required=False),
    Field("by", Nullable(Either((Text(), List(Text())), "a label name or a list of label names",
                                "grouping labels besides model_name")), required=False),
    Field("deployments", List(Obj((
        Field("match", Map(Either((Text(), Number(integer=True)), "a label value (text)"), min_keys=1,
                           example="{deployment: chat}",
                           description="the Prometheus labels of the group(s) this entry covers")),
        Field("profile", Text("the deployment profile: a file relative to the fleet file, or a shipped "
                              "example's name")),
        Field("config", Nullable(Text("the serving config (relative to the fleet file), for the current "
                                      "gamma")), required=False),
    )), min_items=1)),
)), written_by_user=True)


@dataclass(frozen=True)
class FleetEntry:
    """One ``deployments`` entry: label ``match``, ``profile``, optional serving ``config``."""

    match: dict[str, str]
    profile: str
    config: str | None
    line: int | None = None  # where the entry is in the file, for messages


@dataclass(frozen=True)
class FleetFile:
    """A fleet file as read: ``window`` in seconds, paths resolved against the file's folder."""

    prometheus: str | None
    window: float | None
    selector: str | None
    by: tuple[str, ...]
    entries: tuple[FleetEntry, ...]


def load_fleet_file(path: str) -> FleetFile:
    """Read and validate FLEET.yaml against :data:`FLEET_FILE`; InputError names file, line
    and key."""
    from spectune.documents.inputs import read_input
    from spectune.documents.spec_reading import parse_document

    doc, lines = parse_document(read_input(path), path)
    d = FLEET_FILE.load(doc, Reader(path, lines))
    base = Path(path).parent
    by = d.get("by") or []
    entries = []
    for i, e in enumerate(d["deployments"]):
        prof = e["profile"]
        if os.path.exists(base / prof):  # never raises, whatever the name
            prof = str(base / prof)
        conf = e.get("config")
        entries.append(FleetEntry({k: str(v) for k, v in e["match"].items()}, prof,
                                  None if conf is None else str(base / conf), lines.get(f"deployments[{i}]")))
    return FleetFile(d.get("prometheus"), d.get("window"), d.get("selector"),
                     (by,) if isinstance(by, str) else tuple(by), tuple(entries))
