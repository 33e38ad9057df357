"""What an answer of the Prometheus HTTP API must be before spectune uses it.

``observe --prometheus`` (and ``recommend --prometheus``, ``fleet``) ask Prometheus, Thanos,
Mimir or Cortex for instant vectors (``/api/v1/query``) and matrices (``/api/v1/query_range``),
in the documented JSON shape (https://prometheus.io/docs/prometheus/latest/querying/api/):

.. code-block:: json

    {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"model_name": "m", "pod": "p"}, "value": [1795442400.0, "12"]}]}}

A matrix has ``"values": [[time, "value"], ...]`` instead of ``"value"``. Every answer is
checked here, and anything else is refused with :class:`BadBodyFault` (exit 5) on one line
naming the Prometheus, the query and what was wrong -- never an internal error, never a
number read from the wrong place:

* the body is JSON (nested at most as deep as Python's parser allows: a deeper one is
  refused, not a crash), ``status`` success, ``data.result`` a list of the asked type;
* each series is an object whose ``metric`` maps label names to text of at most
  ``MAX_LABEL_CHARS`` characters; a label set appears once per answer (the check of a
  ``/metrics`` scrape, :func:`~spectune.documents.exposition.check_sample`: a duplicate is
  refused, never summed);
* each sample is ``[time, "value"]``: a finite time -- for an instant vector the time asked
  (within ``TIME_SLACK`` seconds), for a matrix one of the asked steps, each step at most
  once per series -- and a finite value; an ``increase()`` is a count from 0 to 2**53, a
  ``resets()`` a whole number in that range.

The counts themselves (accepted <= drafted, ...) are checked after grouping, by the same
function as counts from ``/metrics`` (:func:`spectune.documents.counts.check_counts`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from spectune.base.errors import BadBodyFault, HTTPStatusFault, ObserveUsageError
from spectune.base.limits import MAX_COUNT, MAX_LABEL_CHARS
from spectune.documents.docspec import describe
from spectune.documents.exposition import LabelSet, Series, check_sample

#: How far (seconds) an instant vector's sample time may be from the time asked: Prometheus
#: answers with the evaluation time itself; spectune sends it with millisecond precision.
TIME_SLACK = 1.0

Labels = dict[str, str]


@dataclass(frozen=True)
class Asked:
    """One query: the Prometheus it went to (``where``, credentials removed) and its text."""

    where: str
    query: str

    def fail(self, what: str) -> BadBodyFault:
        q = self.query if len(self.query) <= 160 else self.query[:157] + "..."
        return BadBodyFault(f"{self.where}: the answer to {q!r}: {what}")


def answer_data(body: bytes, status: int, asked: Asked, clean: Callable[[str], str]) -> dict[str, Any]:
    """The ``data`` object of a successful answer; the fault an error answer stands for
    (``clean`` removes the token from what the server says)."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise asked.fail("JSON nested too deeply (a Prometheus answer is a few levels deep)") from None
    except (UnicodeDecodeError, ValueError):
        doc = None
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        if status >= 400:
            hint = " (check the token)" if status in (401, 403) else ""
            raise HTTPStatusFault(f"{asked.where} answered HTTP {status}{hint}")
        raise asked.fail("the server did not answer as the Prometheus HTTP API (/api/v1/query): "
                         "is it a Prometheus URL?")
    if doc["status"] == "error":
        kind, msg = clean(str(doc.get("errorType", "")))[:40], clean(str(doc.get("error", "")))[:300]
        if kind == "bad_data":
            raise ObserveUsageError(f"Prometheus rejected the query {asked.query[:200]!r}: {msg} "
                                    "(check --selector and --by)")
        raise HTTPStatusFault(f"Prometheus query failed (HTTP {status}, {kind or 'error'}): {msg}")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise asked.fail("no data.result list")
    return data


def instant_vector(data: dict[str, Any], asked: Asked, name: str, at: float,
                   whole: bool = False) -> list[tuple[Labels, float]]:
    """(labels, value) per series of an instant vector of ``name``'s ``increase()`` (or
    ``resets()``: ``whole``) at ``at`` (Unix seconds): each a count from 0 to 2**53."""
    seen: set[tuple[str, LabelSet]] = set()
    out = []
    for r, labels in _series(data, "vector", asked):
        t, v = _sample(r.get("value"), asked, f"the value of {_show(labels)}")
        if abs(t - at) > TIME_SLACK:
            raise asked.fail(f"the value of {_show(labels)} is for the time {t:g}, not the time asked "
                             f"({at:.3f})")
        if not 0.0 <= v <= MAX_COUNT or (whole and not v.is_integer()):
            raise asked.fail(f"{_show(labels)} is {v:g}; expected a {'whole number' if whole else 'count'} "
                             "from 0 to 2**53")
        _once(Series(name, _pairs(labels), v), "counter", seen, asked)
        out.append((labels, v))
    return out


def range_matrix(data: dict[str, Any], asked: Asked, name: str, start: float, step: float,
                 steps: int) -> list[tuple[Labels, list[tuple[int, float]]]]:
    """(labels, [(step index 0..steps, value), ...]) per series of a matrix of gauge ``name``
    asked from ``start`` every ``step`` seconds; each step at most once per series."""
    seen: set[tuple[str, LabelSet]] = set()
    out = []
    for r, labels in _series(data, "matrix", asked):
        points = r.get("values")
        if not isinstance(points, list):
            raise asked.fail(f"the values of {_show(labels)} are {describe(points)}; expected a list "
                             "of [time, \"value\"]")
        _once(Series(name, _pairs(labels), 0.0), "gauge", seen, asked)
        got: list[tuple[int, float]] = []
        for p in points:
            t, v = _sample(p, asked, f"a value of {_show(labels)}")
            i = round((t - start) / step)
            if not 0 <= i <= steps or (got and i <= got[-1][0]):
                raise asked.fail(f"{_show(labels)} has a sample at the time {t:g}: not one of the steps "
                                 f"asked ({start:.3f} every {step:g} s), or not after the one before")
            got.append((i, v))
        out.append((labels, got))
    return out


# --------------------------------------------------------------------------- parts
def _series(data: dict[str, Any], kind: str, asked: Asked) -> Iterator[tuple[dict[str, Any], Labels]]:
    """Each series of a result of type ``kind`` (vector, matrix) with its labels."""
    if data.get("resultType") != kind:
        raise asked.fail(f"expected a {kind}, got resultType {describe(data.get('resultType'))}")
    for r in data["result"]:
        yield r, _labels(r, asked)


def _labels(r: Any, asked: Asked) -> Labels:
    if not isinstance(r, dict):
        raise asked.fail(f"a series is {describe(r)}; expected an object with metric and value(s)")
    metric = r.get("metric")
    if not isinstance(metric, dict):
        raise asked.fail(f"a series' metric is {describe(metric)}; expected a mapping of labels")
    out: Labels = {}
    for k, v in metric.items():
        if not isinstance(v, str):
            raise asked.fail(f"the label {k[:40]!r} is {describe(v)}; expected a text value")
        if len(k) > MAX_LABEL_CHARS or len(v) > MAX_LABEL_CHARS:
            raise asked.fail(f"the label {k[:40]!r} has {max(len(k), len(v)):,} characters; at most "
                             f"{MAX_LABEL_CHARS:,} expected")
        if k != "__name__":
            out[k] = v
    return out


def _sample(pair: Any, asked: Asked, what: str) -> tuple[float, float]:
    """(time, value) of ``[time, "value"]``."""
    if not isinstance(pair, list) or len(pair) != 2:
        shape = f"a list of {len(pair)} item(s)" if isinstance(pair, list) else describe(pair)
        raise asked.fail(f"{what} is {shape}; expected [time, \"value\"]")
    t, v = pair
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(_float(t)):
        raise asked.fail(f"{what} has the time {describe(t)}; expected finite Unix seconds")
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise asked.fail(f"{what} is {describe(v)}; expected a number (as text)")
    try:
        x = float(v)
    except ValueError:
        raise asked.fail(f"{what} is {describe(v)}; expected a number (as text)") from None
    except OverflowError:  # a JSON integer of hundreds of digits
        x = math.inf
    if not math.isfinite(x):
        raise asked.fail(f"{what} is {x}; expected a finite number")
    return float(t), x


def _float(x: int | float) -> float:
    """``x`` as a float; inf for an integer too large for one (JSON integers are unbounded)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _once(series: Series, kind: str, seen: set[tuple[str, LabelSet]], asked: Asked) -> None:
    """The duplicate check of a scrape (:func:`check_sample`), naming the query."""
    try:
        check_sample(series, kind, seen, "one answer")
    except BadBodyFault as err:
        raise asked.fail(err.message) from None


def _pairs(labels: Labels) -> LabelSet:
    return tuple(sorted(labels.items()))


def _show(labels: Labels) -> str:
    text = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    return "the series " + (text if len(text) <= 100 else text[:97] + "...")
