"""vLLM's periodic ``SpecDecoding metrics`` log lines → an Observation.

vLLM (V1, ``vllm/v1/spec_decode/metrics.py``) logs, every ``VLLM_LOG_STATS_INTERVAL``
seconds (10 by default) in which drafts were verified::

    SpecDecoding metrics: Mean acceptance length: 2.33, Accepted throughput: 12.11 tokens/s,
    Drafted throughput: 21.96 tokens/s, Accepted: 128 tokens, Drafted: 232 tokens,
    Per-position acceptance rate: 0.667, 0.417, 0.250, Avg Draft acceptance rate: 55.2%

where the per-position rate is accepted-at-position-i / drafts over that period (3
decimals) and the mean acceptance length is 1 + accepted / drafts (2 decimals). The number
of drafts itself is not logged, and it is *not* Drafted / K: drafts can be shorter than K
(the n-gram drafter's are when a match lies near the end of the context — the captured
fixture has 96 drafts for 232 draft tokens at K = 3, where 232 / 3 would give 77). So:

* drafts per line = Accepted / sum_i(rate_i), the identity sum_i rate_i = accepted / drafts,
  exact up to the 3-decimal rounding of the rates; rounded to a whole number and kept within
  [Drafted / K, Drafted] (each draft has 1..K tokens). A line with no accepted token carries
  no such information: there Drafted / K (full-length drafts) is used, and a note says so.
* accepted at position i per line = Accepted x rate_i / sum_j rate_j, which adds up to the
  exact Accepted count; when every rate of a line rounds to 0.000 although Accepted > 0 (a
  few accepted tokens among many drafts), its accepted tokens are put at position 1 (any
  accepted token implies one at position 1) and a note says so;
* lines are summed with these counts as weights: the window's rates are ratios of sums,
  never means of per-line rates.

The operating point (running requests, lengths) is not in these lines: the document says so.
Parsing log lines (free text) uses regular expressions; the Prometheus text never does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from spectune.base.errors import NoSpeculativeTraffic, ObserveUsageError
from spectune.base.limits import MAX_POSITIONS
from spectune.documents.observation import (
    AcceptanceInfo,
    EngineInfo,
    Observation,
    OperatingPoint,
    Source,
    Window,
    speculation,
)
from spectune.engines.vllm.releases import NAME

# `SpecDecoding metrics` log lines (vllm/v1/spec_decode/metrics.py)
LOG_MARKER = "SpecDecoding metrics:"
_LOG_NUM = r"(nan|[0-9]+(?:\.[0-9]+)?)"
LOG_FIELDS = {
    "mean_length": re.compile(r"Mean acceptance length: " + _LOG_NUM),
    "accepted_tput": re.compile(r"Accepted throughput: " + _LOG_NUM + r" tokens/s"),
    "drafted_tput": re.compile(r"Drafted throughput: " + _LOG_NUM + r" tokens/s"),
    "accepted": re.compile(r"Accepted: ([0-9]+) tokens"),
    "drafted": re.compile(r"Drafted: ([0-9]+) tokens"),
    "avg_rate": re.compile(r"Avg Draft acceptance rate: " + _LOG_NUM + "%"),
}
LOG_RATES = re.compile(r"Per-position acceptance rate: ([0-9.,\s]+?)(?:,\s*Avg|\s*$)")
LOG_STAMP = re.compile(r"\b[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?\b")
LOG_OPERATING_POINT = ("unknown: vLLM's SpecDecoding log lines carry no operating point (running "
                       "requests, prompt and generation lengths); observe the server's /metrics "
                       "URL for it")


@dataclass(frozen=True)
class LogRecord:
    """One ``SpecDecoding metrics`` line. Counts are tokens over that logging period;
    ``rates`` are accepted-at-position-i / drafts; throughputs in tokens/s; ``stamp`` is the
    log's own ``MM-DD hh:mm:ss`` (local time, no year), None when the line has none."""

    line_no: int
    stamp: str | None
    accepted: int
    drafted: int
    rates: tuple[float, ...]
    mean_length: float | None
    accepted_throughput: float | None
    drafted_throughput: float | None
    avg_rate_percent: float | None

    @property
    def k(self) -> int:
        return len(self.rates)

    @property
    def period_seconds(self) -> float | None:
        """Length of the logging period, from Drafted / Drafted throughput."""
        if self.drafted_throughput and self.drafted_throughput > 0:
            return self.drafted / self.drafted_throughput
        return None

    def drafts_estimate(self) -> tuple[int, bool]:
        """(drafts in this period, True when derived from the rates / False when Drafted / K)."""
        k = max(self.k, 1)
        lo, hi = math.ceil(self.drafted / k), max(self.drafted, 1)
        s = sum(self.rates)
        if self.accepted > 0 and s > 0:
            est, exact = self.accepted / s, True
        else:
            est, exact = self.drafted / k, False
        return int(min(max(round(est), lo), hi)), exact

    @property
    def unattributed(self) -> bool:
        """True when tokens were accepted but every per-position rate rounds to 0.000."""
        return self.accepted > 0 and sum(self.rates) <= 0

    def accepted_per_position(self) -> tuple[float, ...]:
        """Accepted tokens at each position, summing to ``accepted``; all at position 1 when
        the rates carry no split (:attr:`unattributed`)."""
        s = sum(self.rates)
        if s <= 0:
            return (float(self.accepted), *(0.0 for _ in self.rates[1:]))
        return tuple(self.accepted * r / s for r in self.rates)


def _float(m: re.Match[str] | None) -> float | None:
    if m is None or m.group(1) == "nan" or len(m.group(1)) > 30:
        return None
    x = float(m.group(1))
    return x if math.isfinite(x) else None


def parse_line(line: str, line_no: int = 0) -> LogRecord | None:
    """A :class:`LogRecord` from one log line, or None when it is no complete SpecDecoding line."""
    at = line.find(LOG_MARKER)
    if at < 0:
        return None
    body = line[at + len(LOG_MARKER):]
    acc, dra = LOG_FIELDS["accepted"].search(body), LOG_FIELDS["drafted"].search(body)
    rates = LOG_RATES.search(body)
    if acc is None or dra is None or rates is None:
        return None
    try:
        rate_vals = tuple(float(x) for x in rates.group(1).replace(" ", "").strip(",").split(",") if x)
        accepted, drafted = int(acc.group(1)[:20]), int(dra.group(1)[:20])
    except ValueError:
        return None
    # A line spectune cannot use is skipped (and counted), never turned into an observation
    # that `recommend --observed` would refuse: rates are probabilities, K is bounded, counts
    # are exact as floats and no more tokens are accepted than drafted.
    if (not rate_vals or len(rate_vals) > MAX_POSITIONS or not all(0.0 <= r <= 1.0 for r in rate_vals)
            or max(len(acc.group(1)), len(dra.group(1))) > 15 or accepted > drafted):
        return None
    st = LOG_STAMP.search(line[:at])
    return LogRecord(line_no, st.group(0) if st else None, accepted, drafted,
                     rate_vals, _float(LOG_FIELDS["mean_length"].search(body)),
                     _float(LOG_FIELDS["accepted_tput"].search(body)),
                     _float(LOG_FIELDS["drafted_tput"].search(body)),
                     _float(LOG_FIELDS["avg_rate"].search(body)))


def parse_log(lines: Iterable[str]) -> tuple[list[LogRecord], int]:
    """(records, number of SpecDecoding lines that could not be read)."""
    out: list[LogRecord] = []
    bad = 0
    for i, line in enumerate(lines, 1):
        if LOG_MARKER not in line:
            continue
        rec = parse_line(line, i)
        if rec is None:
            bad += 1
        else:
            out.append(rec)
    return out, bad


def aggregate(records: list[LogRecord], where: str, unreadable: int = 0) -> Observation:
    """Sum log lines into one Observation, weighting by their counts (see the module doc)."""
    if not records and unreadable:
        raise ObserveUsageError(
            f"none of the {unreadable} 'SpecDecoding metrics' line(s) in {where} could be read (rates "
            "outside [0, 1], more than 64 positions, counts beyond 2**53 or more accepted than "
            "drafted tokens): not an observation spectune can use")
    if not records:
        raise NoSpeculativeTraffic(
            f"no 'SpecDecoding metrics' lines in {where}: vLLM logs one only for periods with "
            "drafts, so speculation was idle, not enabled, or stats logging is off "
            "(--disable-log-stats)")
    notes: list[str] = []
    if unreadable:
        notes.append(f"{unreadable} SpecDecoding line(s) could not be read and were skipped")
    ks = Counter(r.k for r in records)
    k = ks.most_common(1)[0][0]
    if len(ks) > 1:
        dropped = sum(n for kk, n in ks.items() if kk != k)
        notes.append(f"{dropped} line(s) report a different number of positions than K = {k} "
                     "(a restart with another config?) and were left out")
        records = [r for r in records if r.k == k]
    drafts = 0
    per_pos = [0.0] * k
    for r in records:
        drafts += r.drafts_estimate()[0]
        for i, a in enumerate(r.accepted_per_position()):
            per_pos[i] += a
    accepted = float(sum(r.accepted for r in records))
    drafted = float(sum(r.drafted for r in records))
    if drafts == 0:
        raise NoSpeculativeTraffic(
            f"no speculative traffic in {where}: its {len(records)} SpecDecoding line(s) report 0 "
            "drafted tokens; speculation is enabled but nothing was drafted: log a period with traffic")
    notes.append("drafts per log line are not logged: estimated as Accepted / sum of per-position rates "
                 "(exact up to the rates' 3-decimal rounding)")
    idle = sum(1 for r in records if r.accepted == 0 and r.drafted > 0)
    if idle:
        notes.append(f"{idle} line(s) had no accepted token: their drafts assumed full length "
                     f"(Drafted / {k})")
    unattributed = [r for r in records if r.unattributed]
    if unattributed:
        notes.append(f"{len(unattributed)} line(s) report {sum(r.accepted for r in unattributed)} accepted "
                     "token(s) but per-position rates that all round to 0.000: those tokens are counted "
                     f"at position 1 and those lines' drafts assumed full length (Drafted / {k})")
    periods = [p for p in (r.period_seconds for r in records) if p is not None]
    stamps = [r.stamp for r in records if r.stamp]
    if stamps:
        notes.append(f"log lines from {stamps[0]} to {stamps[-1]} (server local time; the log shows "
                     "no year)")
    basis = f"{len(records)} log line(s), summed with their counts as weights"
    spec = speculation(float(drafts), drafted, accepted, tuple(per_pos), k, basis)
    assert spec.per_position is not None
    span = f" {stamps[0]} .. {stamps[-1]}" if stamps else ""
    acceptance = AcceptanceInfo(
        "per-position", spec.per_position.conditional,
        f"measured: vLLM log {where}, {len(records)} SpecDecoding line(s){span}, ~{drafts} drafts")
    return Observation(
        engine=EngineInfo(NAME, None, "SpecDecoding metrics log lines"),
        model_name=None,
        source=Source("log", where),
        window=Window(None, None, sum(periods) if periods else None, None, len(records), 0),
        speculation=spec,
        segments=(),
        operating_point=OperatingPoint(note=LOG_OPERATING_POINT),
        acceptance=acceptance,
        notes=tuple(notes),
    )
