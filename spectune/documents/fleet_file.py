"""The fleet file (``spectune fleet FLEET.yaml``, ``spectune rules FLEET.yaml``): where
Prometheus is, how its series are grouped, and each deployment's profile. Read and
validated here, without the command line, so the library (:func:`spectune.rules`) reads it too.

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

from spectune.errors import InputError


@dataclass(frozen=True)
class FleetEntry:
    """One ``deployments`` entry: label ``match``, ``profile``, optional serving ``config``."""

    match: dict[str, str]
    profile: str
    config: str | None
    line: int | None = None  # where the entry is in the file, for messages


@dataclass(frozen=True)
class FleetFile:
    prometheus: str | None
    window: float | None
    selector: str | None
    by: tuple[str, ...]
    entries: tuple[FleetEntry, ...]


def load_fleet_file(path: str) -> FleetFile:
    """Read and validate FLEET.yaml; InputError names file, line and key."""
    from spectune.documents.durations import window_seconds
    from spectune.documents.profiles import parse_yaml, read_text
    from spectune.errors import ObserveUsageError

    doc = parse_yaml(read_text(path), path)
    d = doc.data
    if not isinstance(d, dict):
        raise InputError("expected a mapping with prometheus, window, selector, by, deployments", path)
    known = ("prometheus", "window", "selector", "by", "deployments")
    for k in d:
        if k not in known:
            raise doc.error((str(k),), f"unknown key {k!r}; known keys: {', '.join(known)}")
    base = Path(path).parent

    def text(key: str) -> str | None:
        v = d.get(key)
        if v is not None and not isinstance(v, (str, int, float)):
            raise doc.error((key,), "expected text")
        return None if v is None else str(v)

    window = None
    if d.get("window") is not None:
        try:
            window = window_seconds(str(d["window"]))
        except ObserveUsageError as err:
            raise doc.error(("window",), err.message) from None

    by = d.get("by") or []
    if isinstance(by, str):
        by = [by]
    if not isinstance(by, list) or not all(isinstance(b, str) for b in by):
        raise doc.error(("by",), "expected a list of label names")
    deps = d.get("deployments")
    if not isinstance(deps, list) or not deps:
        raise doc.error(("deployments",), "expected a list of {match, profile, config} entries")
    entries = []
    for i, e in enumerate(deps):
        at = ("deployments", str(i))
        if not isinstance(e, dict) or "profile" not in e or "match" not in e:
            raise doc.error(at, "expected a mapping with match, profile and (optionally) config")
        for k in e:
            if k not in ("match", "profile", "config"):
                raise doc.error((*at, str(k)), f"unknown key {k!r}; known keys: match, profile, config")
        m = e["match"]
        if not isinstance(m, dict) or not m or not all(isinstance(v, (str, int)) for v in m.values()):
            raise doc.error((*at, "match"), "expected a mapping LABEL: VALUE, e.g. {deployment: chat}")
        prof = str(e["profile"])
        if os.path.exists(base / prof):  # never raises, whatever the name
            prof = str(base / prof)
        conf = e.get("config")
        entries.append(FleetEntry({str(k): str(v) for k, v in m.items()}, prof,
                                  None if conf is None else str(base / str(conf)),
                                  doc.lines.get(f"deployments[{i}]")))
    return FleetFile(text("prometheus"), window, text("selector"), tuple(by), tuple(entries))
