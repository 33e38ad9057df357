"""Durations a user types, read by one parser (:func:`parse_duration`) into seconds.

A duration is one or more ``NUMBER UNIT`` terms (``20s``, ``5m``, ``1h30m``, ``500ms``,
``25000us``; the units are Prometheus' up to ``w`` plus ``us``, case-insensitive), or a bare
number whose unit the caller states:

* ``--window``, ``--interval``, a fleet file's ``window`` (:func:`window_seconds`): a bare
  number is **seconds** (``90``), as in Prometheus;
* ``--tpot-slo`` (:func:`tpot_seconds`): a bare number is **milliseconds** (``25``), the unit
  of a profile's ``slo.tpot_ms``.

Each is bounded by :mod:`spectune.base.limits`. :class:`Duration` is the same rule as a part of a
document (a fleet file's ``window``), with its JSON Schema.
"""

from __future__ import annotations

import math
import re
from typing import Any

from spectune.base.errors import InputError, ObserveUsageError
from spectune.base.limits import MAX_TPOT_SECONDS, MAX_WINDOW_SECONDS, MIN_WINDOW_SECONDS
from spectune.documents.inputs import short
from spectune.documents.spec_reading import Reader, describe
from spectune.documents.spec_values import Schema, Spec, record

#: Seconds per unit (longest names first: ``ms`` before ``m``).
UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
         "w": 604800.0}
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_TERM = re.compile(rf"({_NUMBER})\s*({'|'.join(UNITS)})", re.IGNORECASE)
_BARE = re.compile(_NUMBER)
_SECONDS = {u.casefold(): v for u, v in UNITS.items()}  # as the case-insensitive match finds them


def _any_case(unit: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.lower() != c.upper() else c for c in unit)


#: The grammar as a JSON Schema pattern (ECMA 262 has no case-insensitive flag).
PATTERN = (rf"^\s*(?:{_NUMBER}|(?:{_NUMBER}\s*(?:{'|'.join(_any_case(u) for u in UNITS)}))+)\s*$")


def parse_duration(text: str, bare: str = "s") -> float:
    """Seconds from a duration (see the module docstring); a bare number is in ``bare``
    units (a key of :data:`UNITS`). ObserveUsageError (exit 2) unless finite and > 0."""
    raw = str(text).strip()
    if _BARE.fullmatch(raw):
        value = float(raw) * UNITS[bare]
    else:
        pos, value = 0, 0.0
        for m in _TERM.finditer(raw):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _SECONDS[m.group(2).casefold()]
            pos = m.end()
        if pos != len(raw) or not raw:
            raise ObserveUsageError(f"{short(text)} is not a duration (e.g. 90, 20s, 5m, 1h)")
    if not math.isfinite(value) or value <= 0:
        raise ObserveUsageError(f"{short(text)}: a duration must be positive")
    return value


def bounded_seconds(text: str, low: float, high: float) -> float:
    """:func:`parse_duration` (a bare number: seconds) within [``low``, ``high``] seconds;
    ObserveUsageError (exit 2) otherwise."""
    seconds = parse_duration(text)
    if not low <= seconds <= high:
        raise ObserveUsageError(f"{short(text)}: between {low:g} s and {high:g} s")
    return seconds


def window_seconds(text: str) -> float:
    """Seconds of a window (``--window``, a fleet file's ``window``) from ``90``, ``20s``,
    ``5m``, ``1h`` (a bare number: seconds), within [MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS];
    ObserveUsageError (exit 2) otherwise."""
    return bounded_seconds(text, MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS)


def tpot_seconds(text: str) -> float:
    """Seconds of a time-per-output-token target (``--tpot-slo``) from ``25ms``, ``0.025s``,
    ``25000us`` or a bare number of **milliseconds** (``25``), in (0, MAX_TPOT_SECONDS] (the
    bound of a profile's ``slo.tpot_ms``); InputError (exit 2) otherwise."""
    try:
        seconds = parse_duration(text, bare="ms")
    except ObserveUsageError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TPOT_SECONDS:  # NaN fails too
        raise InputError(f"--tpot-slo expects a duration such as 25ms or 0.025s, at most "
                         f"{MAX_TPOT_SECONDS:g} s (a bare number is milliseconds), got {short(text)}")
    return seconds


@record
class Duration(Spec):
    """A duration in a document: text in the grammar above or a number, a bare number being
    seconds; loaded as seconds within [``minimum``, ``maximum``]."""

    minimum: float
    maximum: float
    description: str = ""

    def schema(self) -> Schema:
        return {"anyOf": [{"type": "string", "pattern": PATTERN},
                          {"type": "number", "minimum": self.minimum, "maximum": self.maximum}],
                "description": self.description or "seconds: a number, or text such as 90, 20s, 5m, 1h30m"}

    def load(self, v: Any, path: str, r: Reader) -> float:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise r.fail(path, f"expected a duration such as 90, 20s, 5m or 1h, got {describe(v)}")
        try:
            return bounded_seconds(str(v), self.minimum, self.maximum)
        except ObserveUsageError as err:
            raise r.fail(path, err.message) from None
