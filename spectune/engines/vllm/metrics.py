"""Metrics -- vLLM's ``/metrics``: speculative-decoding counters, the operating point, model names.

V1 engine (vLLM >= 0.8; the only engine since V0 was removed), counters with labels
``engine`` (one series per engine core / DP rank) and ``model_name``:

* ``vllm:spec_decode_num_drafts_total`` — verify passes that carried >= 1 draft token;
* ``vllm:spec_decode_num_draft_tokens_total`` — draft tokens proposed;
* ``vllm:spec_decode_num_accepted_tokens_total`` — draft tokens accepted;
* ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."K-1"}`` — drafts whose
  token at that position was accepted (so accepted_i / drafts is vLLM's "per-position
  acceptance rate", a marginal probability).

All are summed over engines. The older V0 engine exposed
``vllm:spec_decode_num_accepted_tokens_total``, ``..._num_draft_tokens_total``,
``..._num_emitted_tokens_total`` (counters) and the gauges
``vllm:spec_decode_draft_acceptance_rate`` / ``vllm:spec_decode_efficiency``; there, each
verify emits exactly one token that was not drafted, so drafts = emitted - accepted and
K = draft tokens / drafts; no per-position data exists.

Operating point: ``vllm:num_requests_running`` (gauge, summed over engines at each
sample), and deltas of the histograms ``vllm:request_prompt_tokens``,
``vllm:request_generation_tokens`` (requests that finished in the window),
``vllm:iteration_tokens_total`` (tokens per engine step) and
``vllm:inter_token_latency_seconds`` (V0: ``vllm:time_per_output_token_seconds``).

Step timing (:class:`~spectune.documents.observation.StepTiming`): V1 observes one
inter-token latency per request per decode step (all tokens a step emits for a request
count as one), so its window delta gives the decode steps summed over requests (count)
and the request-seconds spent decoding (sum); by Little's law the mean number of requests
in decode is that sum over the window's length, exact for the window, where 5-second
samples of the ``num_requests_running`` gauge miss short bursts. Engine steps are the
``iteration_tokens_total`` count. Without any ``spec_decode`` metric the server runs
plain decode: the window is recorded without acceptance (``flavour`` ``none``), which is
what calibration needs as its baseline.

The names, how a server's metrics are told apart (:func:`flavour`) and read into counts; the
observation is assembled in :mod:`spectune.engines.vllm.observation`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import spectune.documents.exposition as _exposition
from spectune.base.errors import BadBodyFault, SpeculationNotEnabled
from spectune.base.limits import MAX_POSITIONS
from spectune.base.redact import clip
from spectune.documents.exposition import Exposition, Series
from spectune.documents.window import (
    HistogramDelta,
    Segment,
    Select,
    histogram_delta,
)
from spectune.engines.promql import running_per_instance, select

# --------------------------------------------------------------------------- metrics
PREFIX = "vllm:"
DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_METRIC = DRAFTS  # shown only while speculating
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
V0_EMITTED = "vllm:spec_decode_num_emitted_tokens_total"
V0_GAUGES = ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")
RUNNING = "vllm:num_requests_running"
PROMPT = "vllm:request_prompt_tokens"
GENERATION = "vllm:request_generation_tokens"
ITERATION = "vllm:iteration_tokens_total"
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
TPOT = "vllm:request_time_per_output_token_seconds"
DECODE_TIME = "vllm:request_decode_time_seconds"
GENERATED = "vllm:generation_tokens_total"
# Every metric read, by type (Prometheus queries them by type: spectune.observe.prometheus).
COUNTERS: tuple[str, ...] = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS, V0_EMITTED)
HISTOGRAMS: tuple[str, ...] = (PROMPT, GENERATION, ITERATION, *ITL)
GAUGES: tuple[str, ...] = (RUNNING,)
RESET_COUNTER: str | None = DRAFTS  # its resets() count the server restarts in a window
SPECULATION_SERIES: tuple[str, ...] = COUNTERS  # any of them in a window: the server speculates
SPECULATION_NAMED = "vllm:spec_decode_*"  # those series, as messages name them
JSON_METRICS = None  # its /metrics is an exposition, always

V1_METRICS = "vllm:spec_decode_* counters (V1 engine, per-position)"
V0_METRICS = "vllm:spec_decode_* counters (V0 engine: accepted/draft/emitted, no per-position)"
V0_NO_POSITIONS = ("vLLM V0 metrics have no per-position counts; the acceptance given to recommend "
                   "is the i.i.d. alpha matching the mean length")
V1_NO_POSITIONS = (f"no {PER_POS} series in the window (only the drafts counters): the acceptance "
                   "given to recommend is the i.i.d. alpha matching the mean acceptance length, "
                   "with K = draft tokens / drafts rounded, not measured per position")
PLAIN_METRICS = "vllm: step histograms only (speculation off)"

def is_vllm(expo: Exposition) -> bool:
    return _exposition.has_prefix(expo, PREFIX)


def model_names(expo: Exposition) -> list[str]:
    """The ``model_name`` label values seen on any ``vllm:`` sample."""
    return _exposition.model_names(expo, PREFIX)


def resolve_model(expo: Exposition, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them."""
    return _exposition.resolve_model(expo, PREFIX, wanted)


def select_model(model: str | None) -> Callable[[Series], bool] | None:
    if model is None:
        return None

    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None)

    return where


def flavour(expo: Exposition, model: str | None) -> str:
    """``v1`` or ``v0`` spec-decode metrics, or ``none`` (plain decode) when the server shows
    none but does show its step histograms; raises :class:`SpeculationNotEnabled` otherwise."""
    where = select_model(model)
    if expo.get(DRAFTS, where):
        return "v1"
    if expo.get(V0_EMITTED, where) or any(expo.get(g, where) for g in V0_GAUGES):
        return "v0"
    if expo.get(ACCEPTED, where) and expo.get(DRAFT_TOKENS, where):
        return "v0"
    if expo.get(ITERATION + "_count", where) and expo.get(ITL[0] + "_count", where):
        return "none"
    about = f" for model {model!r}" if model else ""
    raise SpeculationNotEnabled(
        f"speculative decoding is not enabled on this vLLM server{about}: its /metrics has no "
        "vllm:spec_decode_* metrics (start vLLM with --speculative-config)")

def _positions(expo: Exposition, where: Select | None) -> dict[int, float]:
    """Accepted tokens per 0-based position, summed over engines. A ``position`` label must
    be a whole number from 0 to MAX_POSITIONS - 1 (vLLM's K is at most that): anything else
    is a bad body, never an allocation of one slot per claimed position."""
    out: dict[int, float] = {}
    for s in expo.get(PER_POS, where):
        pos = s.label("position")
        if pos is None or not pos.isdigit() or len(pos) > 6 or int(pos) >= MAX_POSITIONS:
            shown = pos if pos is None else clip(pos, 20)
            raise BadBodyFault(f"{PER_POS} has position={shown!r}; expected a whole number from 0 to "
                               f"{MAX_POSITIONS - 1}")
        out[int(pos)] = out.get(int(pos), 0.0) + s.value
    return out


def positions_delta(first: Exposition, last: Exposition, where: Select | None) -> dict[int, float]:
    a, b = _positions(first, where), _positions(last, where)
    return {p: max(0.0, v - a.get(p, 0.0)) for p, v in b.items()}


def summed_histogram(snaps: Sequence[Exposition], segs: Sequence[Segment], names: tuple[str, ...],
          where: Select | None) -> HistogramDelta | None:
    for name in names:
        total: HistogramDelta | None = None
        for g in segs:
            h = histogram_delta(snaps[g.first], snaps[g.last], name, where)
            if h is not None:
                total = h if total is None else total + h
        if total is not None:
            return total
    return None


class SegmentCounts(NamedTuple):
    """The spec-decode counter deltas of one segment."""

    segment: Segment
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: dict[int, float]  # 0-based position -> accepted there (V1 only)
    emitted: float | None           # V0 only: emitted tokens (drafts = emitted - accepted)


def recording_rules(window: str, matchers: str, by: str, per_instance: str) -> dict[str, str]:
    """PromQL for ``spectune rules``: acceptance from the counters' rates over ``window`` (a
    Prometheus duration), summed ``by`` the rule's labels, and the running requests per instance."""

    def rate(name: str, extra: str = "") -> str:
        return f"sum by ({by}{extra}) (rate({select(name, matchers)}[{window}]))"

    return {
        "acceptance_rate": f"{rate(ACCEPTED)}\n/\n{rate(DRAFT_TOKENS)}",
        "acceptance_length": f"1 + {rate(ACCEPTED)}\n/\n{rate(DRAFTS)}",
        "acceptance_per_position": f"{rate(PER_POS, ', position')}\n"
                                   f"/ ignoring (position) group_left ()\n{rate(DRAFTS)}",
        "draft_tokens_per_step": f"{rate(DRAFT_TOKENS)}\n/\n{rate(DRAFTS)}",
        "running_requests_per_instance": running_per_instance(RUNNING, matchers, by, per_instance, window),
    }
