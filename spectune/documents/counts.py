"""The checks every measured speculative-decoding count passes, however it came in: a
server's ``/metrics`` (counter deltas between scrapes, ``spectune observe URL``) or Prometheus
(``increase()`` over a window, ``observe --prometheus``, ``recommend --prometheus``,
``fleet``). Both reach the engine's analysis (:func:`spectune.engines.vllm.analyse`), which
passes each segment's counts through :func:`check_counts`: one function decides what is
refused, in one wording.

What vLLM's counters (vllm/v1/spec_decode/metrics.py) guarantee, and so what is required:

* every count is finite, from 0 to ``MAX_COUNT`` (2**53: beyond it a float is no exact count);
* accepted tokens <= draft tokens (a token is accepted only after it was drafted);
* accepted at position i <= drafts (a position is accepted at most once per draft).

A count that breaks them comes from a broken exporter, a proxy or a Prometheus answering
the same series several times: it is refused (exit 5), never summed into an acceptance.

``slack`` (relative) admits what is not an error: Prometheus's ``increase()`` extrapolates
each series to the window's edges but stops at the point where the series would reach
zero, so a series that starts the window close to zero is stretched less than one that
does not, and accepted can come out a little above drafted although every raw sample
obeys the rule (see prometheus/promql/functions.go, extrapolatedRate: the stretch at each
end is at most 1.1 mean scrape intervals). Within the slack such a count is clamped to
its bound and a note says so; beyond it, it is refused as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spectune.base.errors import BadBodyFault
from spectune.base.limits import MAX_COUNT

#: Relative slack for exact counter deltas: float rounding only.
ROUNDING = 1e-9
#: Relative slack for Prometheus's increase(): its extrapolation can stretch a series by up
#: to 1.1 scrape intervals at the window's start where the other is clamped at zero (see the
#: module docstring): 10% covers windows of 11 or more scrapes; a duplicated series (2x, 3x)
#: stays far outside.
INCREASE_SLACK = 0.10


@dataclass(frozen=True)
class Counts:
    """One stretch of a window (a segment): ``drafts`` (verify passes with >= 1 draft
    token), ``draft_tokens``, ``accepted`` tokens and ``per_position`` accepted at positions
    1..K (empty when the server reports none)."""

    drafts: float
    draft_tokens: float
    accepted: float
    per_position: tuple[float, ...] = ()


def check_counts(c: Counts, what: str, slack: float = ROUNDING) -> tuple[Counts, str | None]:
    """``c`` when it obeys the rules of the module docstring (``what`` names where the counts
    come from, for the message); a violation within ``slack`` (relative) is clamped and the
    second item is a note saying so. Raises :class:`BadBodyFault` (exit 5) otherwise."""
    named = [("drafts", c.drafts), ("draft tokens", c.draft_tokens), ("accepted tokens", c.accepted)]
    named += [(f"accepted at position {i}", v) for i, v in enumerate(c.per_position, 1)]
    for name, v in named:
        if not 0.0 <= v <= MAX_COUNT:  # NaN fails too
            raise BadBodyFault(f"{what}: {name} {v:g}: expected a count from 0 to 2**53")
    allowed = 1.0 + max(slack, ROUNDING)
    if c.accepted > c.draft_tokens * allowed:
        raise BadBodyFault(f"{what}: {c.accepted:g} accepted tokens but {c.draft_tokens:g} draft tokens: "
                           "no more tokens can be accepted than were drafted (a series counted twice, "
                           "or a broken exporter): refused")
    for i, a in enumerate(c.per_position, 1):
        if a > c.drafts * allowed:
            raise BadBodyFault(f"{what}: {a:g} accepted at position {i} but {c.drafts:g} drafts: a position "
                               "is accepted at most once per draft (a series counted twice, or a broken "
                               "exporter): refused")
    fixed = Counts(c.drafts, c.draft_tokens, min(c.accepted, c.draft_tokens),
                   tuple(min(a, c.drafts) for a in c.per_position))
    if fixed == c:
        return c, None
    return fixed, (f"{what}: accepted counts above their bound by at most {slack:.0%} (Prometheus "
                   "increase() extrapolates each series separately) were clamped to it")


def check_segment(drafts: float, draft_tokens: float, accepted: float, per_position: Mapping[int, float],
                  what: str, slack: float = ROUNDING) -> tuple[float, dict[int, float], str | None]:
    """:func:`check_counts` of one segment whose ``per_position`` maps 0-based positions to
    accepted tokens (a missing position counts 0): (accepted, per_position, note) as checked."""
    k = max(per_position) + 1 if per_position else 0
    c, note = check_counts(Counts(drafts, draft_tokens, accepted, tuple(per_position.get(i, 0.0)
                                                                          for i in range(k))), what, slack)
    return c.accepted, {i: v for i, v in enumerate(c.per_position) if i in per_position}, note
