"""Reading recorded draft rounds for the ragged-depth simulator (:mod:`spectune.core.ragged`).

Format: JSON Lines, one draft round per line,

    {"confidences": [0.93, 0.88, 0.41], "committed": 3}

``confidences``: the drafter's own per-depth conditional confidences a_1..a_K (K = the
depth the round was drafted to, the same on every line); ``committed``: tokens the round
committed, 1 + accepted drafts, in 1..K+1. Blank lines and lines starting with '#' are
skipped. A ``.json`` file may instead hold a list of such objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from spectune.base.errors import InputError
from spectune.core.ragged import Rounds
from spectune.documents.inputs import JsonProblem, json_document, parse_json
from spectune.documents.yaml_doc import read_text

MAX_ROUNDS = 5_000_000


def _round(obj: Any, where: str, line: int, depth: int | None) -> tuple[list[float], int]:
    if not isinstance(obj, dict) or set(obj) - {"confidences", "committed"}:
        raise InputError("expected an object with keys confidences, committed", where, line)
    conf = obj.get("confidences")
    if (not isinstance(conf, list) or not conf or len(conf) > 64
            or not all(isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1
                       for c in conf)):
        raise InputError("expected 'confidences': a list of 1..64 numbers in [0, 1]", where, line,
                         "confidences")
    if depth is not None and len(conf) != depth:
        raise InputError(f"expected {depth} confidences (as on the first round), got {len(conf)}",
                         where, line, "confidences")
    committed = obj.get("committed")
    if (not isinstance(committed, int) or isinstance(committed, bool)
            or not 1 <= committed <= len(conf) + 1):
        raise InputError(f"expected 'committed': a whole number in 1..{len(conf) + 1}", where, line,
                         "committed")
    return [float(c) for c in conf], committed


def load_rounds(path: str) -> Rounds:
    """Recorded rounds from ``path``; InputError naming file, line and key on bad input."""
    text = read_text(path)
    items: list[tuple[int, Any]] = []
    if Path(path).suffix == ".json":
        data = json_document(text, path)
        if not isinstance(data, list):
            raise InputError("expected a JSON list of rounds", path, 1)
        items = [(1, x) for x in data]
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    items.append((n, parse_json(line)))
                except JsonProblem as exc:
                    raise InputError(f"not valid JSON: {exc.message}", path, n) from None
    if not items:
        raise InputError("no rounds in the file", path)
    if len(items) > MAX_ROUNDS:
        raise InputError(f"more than {MAX_ROUNDS} rounds", path)
    depth: int | None = None
    conf, committed = [], []
    for n, obj in items:
        c, k = _round(obj, path, n, depth)
        depth = len(c)
        conf.append(c)
        committed.append(k)
    acc = np.asarray(committed, dtype=np.int64) - 1
    return Rounds(np.asarray(conf, dtype=np.float64), acc, np.ones(len(conf)),
                  f"{len(conf)} recorded rounds from {path}")
