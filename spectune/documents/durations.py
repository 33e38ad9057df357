"""Durations a user types (``--window``, ``--interval``, a fleet file's ``window``): seconds
from ``90``, ``20s``, ``5m``, ``1h30m``, ``500ms`` (Prometheus' units up to ``w``), bounded
by spectune.limits. (``--tpot-slo`` has its own unit rule, a bare number being
milliseconds: spectune.core.slo.parse_duration.)"""

from __future__ import annotations

import math
import re

from spectune.documents.inputs import short
from spectune.errors import ObserveUsageError
from spectune.limits import MAX_WINDOW_SECONDS, MIN_WINDOW_SECONDS

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def window_seconds(text: str) -> float:
    """Seconds of a window (``--window``, a fleet file's ``window``) from ``90``, ``20s``,
    ``5m``, ``1h``, within [MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS]; ObserveUsageError
    (exit 2) otherwise."""
    seconds = parse_duration(text)
    if not MIN_WINDOW_SECONDS <= seconds <= MAX_WINDOW_SECONDS:
        raise ObserveUsageError(f"{short(text)}: between {MIN_WINDOW_SECONDS:g} s and "
                                f"{MAX_WINDOW_SECONDS:g} s")
    return seconds


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``20s``, ``5m``, ``1h30m``, ``500ms`` (Prometheus' units up to w)."""
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        pos, value = 0, 0.0
        for m in _DURATION.finditer(raw):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if pos != len(raw) or not raw:
            raise ObserveUsageError(f"{text!r} is not a duration (e.g. 90, 20s, 5m, 1h)") from None
    if not math.isfinite(value) or value <= 0:
        raise ObserveUsageError(f"{text!r}: a duration must be positive")
    return value
