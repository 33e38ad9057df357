"""Counter deltas over an observation window, counter resets, and the segments between them.

A *snapshot* is one successful scrape: ``(time, Exposition)``. Between two consecutive
snapshots a counter reset (a server restart) is declared when, for any engine counter
series present in both (samples ending ``_total``, ``_count`` or ``_bucket`` of counter or
histogram families),

* the value went down, or
* its ``_created`` timestamp changed, or
* ``process_start_time_seconds`` changed.

The window is then cut into *segments* of consecutive snapshots without a reset. Deltas
are taken inside segments only; the interval that spans a reset is excluded, because
what was counted there (before the restart, and after it up to the next scrape) is
unknown. Nothing from across a reset is averaged in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectune.base.errors import BadBodyFault
from spectune.documents.exposition import Exposition, LabelSet, Series

Select = Callable[[Series], bool]


@dataclass(frozen=True)
class Snapshot:
    """One scrape in the window: ``time`` in Unix seconds."""

    time: float
    exposition: Exposition


@dataclass(frozen=True)
class Segment:
    """Snapshots ``first..last`` (indices into the window's snapshots), free of resets.

    ``reset_before`` says why this segment starts with a reset (None for the first)."""

    first: int
    last: int
    start: float
    end: float
    reset_before: str | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def samples(self) -> int:
        return self.last - self.first + 1


def _counter_names(expo: Exposition, prefixes: tuple[str, ...]) -> list[str]:
    out = []
    for name in expo.names():
        if not name.startswith(prefixes):
            continue
        if name.endswith(("_total", "_count", "_bucket")):
            out.append(name)
    return out


def _by_labels(series: Sequence[Series]) -> dict[LabelSet, float]:
    return {s.labels: s.value for s in series}


def reset_between(a: Exposition, b: Exposition, prefixes: tuple[str, ...]) -> str | None:
    """Why the counters were reset between snapshots ``a`` and ``b`` (None when they were not)."""
    pa, pb = a.total("process_start_time_seconds"), b.total("process_start_time_seconds")
    if pa is not None and pb is not None and pa != pb:
        return "process_start_time_seconds changed (the server process restarted)"
    # speculative-decoding counters first, so the reason names the counter that matters
    for name in sorted(_counter_names(b, prefixes), key=lambda n: ("spec_decode" not in n, n)):
        before = _by_labels(a.get(name))
        for s in b.get(name):
            old = before.get(s.labels)
            if old is not None and s.value < old:
                lab = ",".join(f"{k}={v}" for k, v in s.labels if k not in ("le",))
                return f"{name}{{{lab}}} fell from {old:g} to {s.value:g}"
    for name in sorted(n for n in b.names() if n.startswith(prefixes) and n.endswith("_created")):
        before = _by_labels(a.get(name))
        for s in b.get(name):
            old = before.get(s.labels)
            if old is not None and s.value != old:
                return f"{name} changed (the counters were re-created)"
    return None


def split_segments(snapshots: Sequence[Snapshot], prefixes: tuple[str, ...]) -> tuple[Segment, ...]:
    """Cut the window at every counter reset."""
    if not snapshots:
        return ()
    segments: list[Segment] = []
    first, why = 0, None
    for i in range(1, len(snapshots)):
        reason = reset_between(snapshots[i - 1].exposition, snapshots[i].exposition, prefixes)
        if reason is not None:
            segments.append(Segment(first, i - 1, snapshots[first].time, snapshots[i - 1].time, why))
            first, why = i, reason
    segments.append(Segment(first, len(snapshots) - 1, snapshots[first].time, snapshots[-1].time, why))
    return tuple(segments)


def counter_delta(first: Exposition, last: Exposition, name: str,
                  where: Select | None = None) -> dict[LabelSet, float] | None:
    """Per-series increase of counter sample ``name`` from ``first`` to ``last`` (same segment).

    A series absent from ``first`` but present in ``last`` was created in between and
    counts from 0. Returns None when ``last`` has no such sample at all."""
    end = last.get(name, where)
    if not end:
        return None
    start = _by_labels(first.get(name, where))
    return {s.labels: max(0.0, s.value - start.get(s.labels, 0.0)) for s in end}


def summed_delta(first: Exposition, last: Exposition, name: str, where: Select | None = None) -> float | None:
    """Increase of counter ``name`` summed over all its series (e.g. over engines)."""
    d = counter_delta(first, last, name, where)
    return None if d is None else float(sum(d.values()))


@dataclass(frozen=True)
class HistogramDelta:
    """Observations added to a histogram: ``count``, ``sum`` (in the metric's unit), and
    cumulative ``buckets`` as (upper bound ``le``, count) with ``le`` = inf last."""

    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...]

    def __add__(self, other: HistogramDelta) -> HistogramDelta:
        mine = dict(self.buckets)
        theirs = dict(other.buckets)
        les = sorted(set(mine) | set(theirs))
        return HistogramDelta(self.count + other.count, self.sum + other.sum,
                              tuple((le, mine.get(le, 0.0) + theirs.get(le, 0.0)) for le in les))

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


def histogram_delta(first: Exposition, last: Exposition, base: str,
                    where: Select | None = None) -> HistogramDelta | None:
    """Delta of histogram ``base`` (samples ``base_count``, ``base_sum``, ``base_bucket``),
    summed over series that differ in anything but ``le``."""
    count = summed_delta(first, last, base + "_count", where)
    total = summed_delta(first, last, base + "_sum", where)
    if count is None or total is None:
        return None
    per_le: dict[float, float] = {}
    for labels, v in (counter_delta(first, last, base + "_bucket", where) or {}).items():
        le = dict(labels).get("le")
        if le is None:
            continue
        try:
            bound = float(le)  # "+Inf" too
        except ValueError:
            bound = math.nan
        if math.isnan(bound):
            shown = le if len(le) <= 20 else le[:17] + "..."
            raise BadBodyFault(f"{base}_bucket has le={shown!r}; expected a bucket bound (a number or +Inf)")
        per_le[bound] = per_le.get(bound, 0.0) + v
    return HistogramDelta(count, total, tuple(sorted(per_le.items())))


@dataclass(frozen=True)
class Capture:
    """A finished window: the successful ``snapshots`` in time order and what is known about
    how they were taken (``source`` URL without credentials, ``interval_seconds`` between
    samples, ``failed_samples`` that gave no answer, ``notes`` about retries;
    ``count_slack``: the relative slack :func:`spectune.documents.counts.check_counts` allows,
    0 for exact counter deltas)."""

    snapshots: tuple[Snapshot, ...]
    source: str
    interval_seconds: float | None = None
    failed_samples: int = 0
    notes: tuple[str, ...] = ()
    engine_version: str | None = None
    count_slack: float = 0.0
