"""``spectune check DIR --profiles MAP.yaml``: the CI gate over a directory of manifests (a
GitOps repository's deploy/ folder), each manifest checked against the deployment profile
the map names for it.

The map (paths relative to the map file; profiles may also be shipped names)::

    profiles:
      chat.yaml: profiles/chat.yaml          # manifest in DIR -> its deployment profile
      code/statefulset.yaml: profiles/code.yaml

Every ``*.yaml`` / ``*.yml`` under DIR must be mapped (or listed under ``ignore:``), so a new
manifest cannot slip past the gate unchecked; a mapped file that does not exist is an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from spectune.base.errors import EXIT_GATE_FAILED, EXIT_OK, InputError
from spectune.documents.check_report import CHECK_SET
from spectune.documents.envelope import Document


def load_profile_map(path: str, folder: str) -> list[tuple[str, str]]:
    """(manifest path, profile) for every manifest under ``folder``, in path order."""
    from spectune.documents.profiles import parse_yaml, read_text

    doc = parse_yaml(read_text(path), path)
    d = doc.data
    if not isinstance(d, dict) or not isinstance(d.get("profiles"), dict) or not d["profiles"]:
        raise doc.error(("profiles",), "expected `profiles:` mapping each manifest (relative to the "
                                       "checked directory) to its deployment profile")
    for k in d:
        if k not in ("profiles", "ignore"):
            raise doc.error((str(k),), f"unknown key {k!r}; known keys: profiles, ignore")
    ignore = d.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        raise doc.error(("ignore",), "expected a list of manifest paths")
    root, base = Path(folder), Path(path).parent
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if p.suffix.lower() in (".yaml", ".yml") and p.is_file())
    out = []
    for manifest, profile in d["profiles"].items():
        key = ("profiles", str(manifest))
        if not isinstance(profile, str):
            raise doc.error(key, "expected the profile's file name (or a shipped example's name)")
        if str(manifest) not in found:
            raise doc.error(key, f"no manifest {manifest!r} under {folder}")
        prof = base / profile
        out.append((str(root / str(manifest)), str(prof) if os.path.exists(prof) else profile))
    unmapped = [m for m in found if m not in d["profiles"] and m not in ignore]
    if unmapped:
        raise InputError(f"{', '.join(unmapped)} under {folder} {'is' if len(unmapped) == 1 else 'are'} "
                         f"in neither `profiles:` nor `ignore:` of {path}", path)
    return sorted(out)


def check_directory(folder: str, profile_map: str, tolerance: float,
                    warn: Callable[[str], None]) -> tuple[Document, int]:
    """Each mapped manifest checked against its profile: a ``CheckSet`` document and the exit
    code (1 when any manifest fails the gate)."""
    from spectune.api.gate import check
    from spectune.documents.profiles import load_deployment
    from spectune.engines.serving_config import read_serving_config

    reports: list[Document] = []
    code: int = EXIT_OK
    for manifest, profile in load_profile_map(profile_map, folder):
        result = check(read_serving_config(manifest), load_deployment(profile), tolerance)
        for w in result.warnings:
            warn(f"{manifest}: {w}")
        reports.append({"manifest": manifest, "profile": profile, "report": result.document})
        code = max(code, result.exit_code)
    failed = [r["manifest"] for r in reports if r["report"]["verdict"] == "fail"]
    summary = (f"{len(reports) - len(failed)} of {len(reports)} manifests pass"
               + (f"; failing: {', '.join(failed)}" if failed else ""))
    doc = CHECK_SET.dump({"verdict": "fail" if failed else "pass", "summary": summary, "checks": reports})
    return doc, EXIT_GATE_FAILED if failed else code
