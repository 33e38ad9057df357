"""Metrics -- TensorRT-LLM's Prometheus exposition at ``/prometheus/metrics`` (``trtllm-serve``;
its ``/metrics`` is the JSON iteration-stats queue, not read here).

From ``tensorrt_llm/metrics/collector.py`` (NVIDIA/TensorRT-LLM @ 050f80def8df236e326949c8bd9dee10fd896a83,
class ``MetricsCollector``; prefix ``trtllm_``, base labels ``model_name`` and ``engine_type``), the
1.3.0rc line on (NVIDIA/TensorRT-LLM#12545, #12636; no 1.2.x or older release has them):

* ``trtllm_spec_decode_num_draft_tokens_total`` / ``..._num_accepted_tokens_total`` (Counters):
  ``specDecodingStats.numDraftTokens`` / ``numAcceptedTokens`` of every iteration
  (``log_iteration_stats``; needs ``enable_iter_perf_stats: true``);
* ``trtllm_spec_decode_drafted_tokens_total{token_position}`` /
  ``trtllm_spec_decode_accepted_tokens_total{token_position}`` (Counters, 0-based positions):
  per finished request, the draft tokens proposed / accepted at each position
  (``log_request_metrics_dict``; needs ``return_perf_metrics: true``);
* ``trtllm_num_requests_running`` (Gauge): active requests.

Every draft proposes position 0, so drafts = the drafted count at position 0; accepted at
position i over drafts is the per-position (marginal) rate, as vLLM's counters give it. Without
the per-position series (``return_perf_metrics`` off) only the totals are there: the acceptance
rate is exact, the number of drafts is draft tokens / K with K given by
``--num-speculative-tokens`` (TensorRT-LLM does not export it), and the acceptance handed to
``recommend`` is the i.i.d. alpha of that mean length. Per-position counters count finished
requests, the totals iterations, so they are not mixed.

Releases before the counters (1.0 to 1.2.x) answer ``/metrics`` with their iteration statistics
(JSON), which :mod:`spectune.engines.trtllm.iterstats` turns into running counters of the same
two totals plus the drafts (``numRequestsWithDraftTokens``): read here like the exposition, with
drafts counted (no K needed when every draft had K tokens) and no per-position counts.
"""

from __future__ import annotations

from typing import Any

import spectune.documents.exposition as _exposition
from spectune.base.errors import BadBodyFault, NoSpeculativeTraffic, ObserveUsageError, SpeculationNotEnabled
from spectune.base.limits import MAX_GAMMA, MAX_POSITIONS
from spectune.base.redact import clip
from spectune.core.acceptance import Acceptance
from spectune.documents.counts import check_segment
from spectune.documents.exposition import Exposition, Series
from spectune.documents.observation import (
    AcceptanceInfo,
    EngineInfo,
    Observation,
    OperatingPoint,
    SegmentInfo,
    Source,
    Speculation,
    Window,
    distribution,
    iso,
    speculation,
)
from spectune.documents.window import Capture, Select, counter_delta, split_segments, summed_delta
from spectune.engines.promql import running_per_instance, select
from spectune.engines.trtllm.releases import METRICS_MIN, NAME

PREFIX = "trtllm_"
DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens_total"
ACCEPTED = "trtllm_spec_decode_num_accepted_tokens_total"
DRAFTED_POS = "trtllm_spec_decode_drafted_tokens_total"
ACCEPTED_POS = "trtllm_spec_decode_accepted_tokens_total"
POSITION = "token_position"
RUNNING = "trtllm_num_requests_running"
# Running sums of TensorRT-LLM's JSON iteration statistics (:mod:`.iterstats`): the two totals above
# under the collector's own names, and these, spectune's (no TensorRT-LLM metric has these names)
JSON_DRAFTS = "trtllm_iterstats_num_requests_with_draft_tokens_total"  # verify passes with a draft
JSON_ITERATIONS = "trtllm_iterstats_iterations_total"  # records read
JSON_SPECULATING = "trtllm_iterstats_speculating_iterations_total"  # records with specDecodingStats
JSON_SKIPPED = "trtllm_iterstats_skipped_iterations_total"  # iteration numbers never answered
JSON_CREATED = "trtllm_iterstats_created"  # which server run (iteration numbers went back: a restart)
SPEC_METRIC = DRAFT_TOKENS  # a labelled Counter: no series until an iteration drafted
COUNTERS: tuple[str, ...] = (DRAFT_TOKENS, ACCEPTED, DRAFTED_POS, ACCEPTED_POS)
HISTOGRAMS: tuple[str, ...] = ()
GAUGES: tuple[str, ...] = (RUNNING,)
RESET_COUNTER: str | None = DRAFT_TOKENS
SPECULATION_SERIES: tuple[str, ...] = COUNTERS
SPECULATION_NAMED = "trtllm_spec_decode_*"
METRICS = "trtllm_spec_decode_* counters (per-position)"
METRICS_JSON = "iteration statistics (GET /metrics JSON, specDecodingStats totals)"
TOTALS_ONLY = ("no trtllm_spec_decode_drafted/accepted_tokens_total{token_position} series (start the server "
               "with return_perf_metrics: true): the acceptance given to recommend is the i.i.d. alpha "
               "matching the mean acceptance length, with K from --num-speculative-tokens")


def _select(model: str | None) -> Select | None:
    if model is None:
        return None

    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None)

    return where


ITERATION_STATS = ("TensorRT-LLM's iteration statistics (GET /metrics JSON) carry no per-position "
                   "counts: the acceptance given to recommend is the i.i.d. alpha matching the mean "
                   "acceptance length")
NO_RECORDS = ("TensorRT-LLM lists iterations at /metrics only with enable_iter_perf_stats: true, and "
              "1.0 / 1.1 fill specDecodingStats for two-model drafters only (NVIDIA/TensorRT-LLM#9855)")


def from_iteration_stats(expo: Exposition) -> bool:
    """Whether ``expo`` holds the running sums of TensorRT-LLM's JSON iteration statistics."""
    return expo.has(JSON_ITERATIONS)


def check_metrics(expo: Exposition, model: str | None) -> None:
    """Raise :class:`SpeculationNotEnabled` when no speculative-decoding counter is there (from the
    iteration statistics: when iterations came and none carried ``specDecodingStats``)."""
    if from_iteration_stats(expo):
        if (expo.total(JSON_ITERATIONS) or 0) > 0 and not expo.total(JSON_SPECULATING):
            raise SpeculationNotEnabled(
                "this TensorRT-LLM server's iteration statistics (/metrics) carry no specDecodingStats: "
                "speculative decoding is off (no speculative_config)")
        return
    where = _select(model)
    if not any(expo.get(name, where) for name in COUNTERS):
        raise SpeculationNotEnabled(
            "this TensorRT-LLM server shows no trtllm_spec_decode_* counters: speculative decoding is off, "
            "nothing was drafted yet, enable_iter_perf_stats / return_perf_metrics are off, or it predates "
            f"them (TensorRT-LLM >= {METRICS_MIN}rc)")


def open_window(expo: Exposition, model_name: str | None) -> tuple[str | None, bool]:
    """From the first scrape: the model to observe, its counters checked (fails fast)."""
    model = _exposition.resolve_model(expo, PREFIX, model_name)
    check_metrics(expo, model)
    return model, True


def _by_position(first: Exposition, last: Exposition, name: str, where: Select | None) -> dict[int, float]:
    """Counter deltas of ``name`` per 0-based ``token_position`` (a bad label is a bad body)."""
    out: dict[int, float] = {}
    for labels, v in (counter_delta(first, last, name, where) or {}).items():
        pos = dict(labels).get(POSITION)
        if pos is None or not pos.isdigit() or len(pos) > 6 or int(pos) >= MAX_POSITIONS:
            shown = pos if pos is None else clip(pos, 20)
            raise BadBodyFault(f"{name} has {POSITION}={shown!r}; expected a whole number from 0 to "
                               f"{MAX_POSITIONS - 1}")
        out[int(pos)] = out.get(int(pos), 0.0) + v
    return out


def analyse_window(capture: Capture, model: str | None, opened: Any = None,
                   num_speculative_tokens: int | None = None) -> Observation:
    """The Observation of one captured window of a TensorRT-LLM server."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = _select(model)
    if not opened:
        check_metrics(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)
    rows = []
    per_pos_seen = any(e.get(DRAFTED_POS, where) for e in snaps)
    counted = from_iteration_stats(snaps[-1])  # the JSON iteration statistics count drafts too
    k_given = num_speculative_tokens
    skipped = 0.0
    for g in segs:
        e0, e1 = snaps[g.first], snaps[g.last]
        if per_pos_seen:
            drafted = _by_position(e0, e1, DRAFTED_POS, where)
            accepted_pp = _by_position(e0, e1, ACCEPTED_POS, where)
            drafts, dtok, acc = drafted.get(0, 0.0), sum(drafted.values()), sum(accepted_pp.values())
        else:
            dtok = summed_delta(e0, e1, DRAFT_TOKENS, where) or 0.0
            acc = summed_delta(e0, e1, ACCEPTED, where) or 0.0
            if counted:
                drafts = summed_delta(e0, e1, JSON_DRAFTS, where) or 0.0
                skipped += summed_delta(e0, e1, JSON_SKIPPED, where) or 0.0
            elif not k_given:
                raise ObserveUsageError("this TensorRT-LLM server shows only the draft/accepted token "
                                        "totals, not the draft length: give it with --num-speculative-tokens "
                                        "K (or start the server with return_perf_metrics: true)")
            else:
                drafts = dtok / k_given
            accepted_pp = {}
        acc, accepted_pp, note = check_segment(drafts, dtok, acc, accepted_pp, capture.source,
                                               capture.count_slack)
        notes += [note] if note else []
        rows.append((g, drafts, dtok, acc, accepted_pp))
    seconds = times[-1] - times[0]
    if len(segs) > 1:
        notes.append(f"counter reset{'s' if len(segs) > 2 else ''} in the window: split into {len(segs)} "
                     "segments; the interval across each reset is excluded")
    active = [r for r in rows if r[1] > 0]
    if not active:
        about = f" for model {model!r}" if model else ""
        hint = f" ({NO_RECORDS})" if counted else ""
        raise NoSpeculativeTraffic(f"no speculative traffic in the window{about}: 0 drafts in "
                                   f"{seconds:.1f} s "
                                   f"({len(snaps)} samples): send traffic or widen --window{hint}")
    drafts = sum(r[1] for r in active)
    dtok = sum(r[2] for r in active)
    acc = sum(r[3] for r in active)
    per_pos: dict[int, float] = {}
    for r in active:
        for p, v in r[4].items():
            per_pos[p] = per_pos.get(p, 0.0) + v
    basis = ("one segment (no counter reset)" if len(segs) == 1
             else f"summed over {len(active)} of {len(segs)} segments (counter resets excluded)")
    version = capture.engine_version
    vtxt = f"TensorRT-LLM {version}" if version else "TensorRT-LLM"
    where_txt = f"{capture.source}{f', model {model}' if model else ''}, {iso(times[0])} + {seconds:.0f} s"
    if per_pos_seen:
        k = max(per_pos) + 1 if per_pos else max(1, round(dtok / drafts))
        spec = speculation(drafts, dtok, acc, tuple(per_pos.get(i, 0.0) for i in range(k)), k, basis)
        if dtok < drafts * k - 0.5:
            notes.append(f"mean draft length {dtok / drafts:.2f} < K = {k}: some drafts were shorter than K "
                         "(draft_len_schedule, or n-gram matches); per-position rates count a missing draft "
                         "token as not accepted")
        assert spec.per_position is not None  # accepted counts per position were given
        acceptance = AcceptanceInfo("per-position", spec.per_position.conditional,
                                    f"measured: {vtxt} at {where_txt}, {drafts:g} drafts "
                                    "(per-position counters)")
        metrics = METRICS
    else:
        k, k_from = (int(k_given), "given") if k_given else _draft_length(dtok, drafts)
        if not 1 <= k <= MAX_GAMMA:
            if k_from == "given":
                raise ObserveUsageError(f"--num-speculative-tokens must be from 1 to {MAX_GAMMA}")
            raise BadBodyFault(f"the server's drafts are {k} tokens long; spectune evaluates 1 to "
                               f"{MAX_GAMMA}")
        if counted and dtok > drafts * k * (1 + 1e-9):
            raise ObserveUsageError(f"--num-speculative-tokens {k} is below the mean draft length the server "
                                    f"counted ({dtok / drafts:.3f}): give its max_draft_len")
        if k_from != "given":
            notes.append(f"K = {k} {k_from}: every draft had {k} tokens")
        if skipped:
            notes.append(f"{skipped:g} iteration numbers were never answered: records were dropped (the "
                         "queue keeps max_stats_len, 1000 by default: use a shorter --interval) or another "
                         "client read /metrics; the acceptance is over the iterations read")
        tau = 1.0 + acc / drafts
        about = ITERATION_STATS if counted else TOTALS_ONLY
        spec = Speculation(drafts, dtok, acc, k, dtok / drafts, tau, acc / dtok if dtok else None, None,
                           about, basis)
        notes.append(about)
        iid = Acceptance.from_mean_length(min(max(tau, 1.0), k + 1.0), k,
                                          f"measured: {vtxt} at {where_txt}: i.i.d. alpha from mean "
                                          "acceptance "
                                          f"length (K = {k} {k_from})")
        acceptance = AcceptanceInfo("mean-length", iid.rates, iid.source)
        metrics = METRICS_JSON if counted else METRICS.replace("per-position", "totals only")
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    sampled = ("numActiveRequests of the last iteration before each scrape" if counted
               else "running requests are sampled at each scrape")
    op = OperatingPoint(running=distribution(running), prompt_tokens=None, generation_tokens=None,
                        iteration_tokens=None, inter_token_latency_seconds=None,
                        note=f"{sampled}; TensorRT-LLM exports no token histograms")
    return Observation(
        engine=EngineInfo(NAME, version, metrics),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), seconds, capture.interval_seconds, len(snaps),
                      capture.failed_samples),
        speculation=spec,
        segments=tuple(SegmentInfo(iso(g.start) or "", iso(g.end) or "", g.seconds, g.samples, d, t, a,
                                   g.reset_before) for g, d, t, a, _ in rows),
        operating_point=op,
        acceptance=acceptance,
        notes=tuple(notes),
    )


def _draft_length(draft_tokens: float, drafts: float) -> tuple[int, str]:
    """K from counted drafts: the mean draft length when it is whole (every draft had K tokens);
    ObserveUsageError otherwise (shorter drafts: draft_len_schedule, n-gram matches)."""
    mean = draft_tokens / drafts
    if abs(mean - round(mean)) > 1e-9 * mean:
        raise ObserveUsageError(f"the server's drafts were {mean:.3f} tokens long on average, not a whole "
                                "number (draft_len_schedule, or n-gram matches shorter than K): give its "
                                "max_draft_len with --num-speculative-tokens")
    return round(mean), "from draft tokens / drafts"


def recording_rules(window: str, matchers: str, by: str, per_instance: str) -> dict[str, str]:
    """PromQL for ``spectune rules``: acceptance from the per-position counters' rates over
    ``window`` (drafts = drafted tokens at position 0), summed ``by`` the rule's labels."""

    def rate(name: str, extra: str = "", *more: str) -> str:
        return f"sum by ({by}{extra}) (rate({select(name, matchers, *more)}[{window}]))"

    drafts = rate(DRAFTED_POS, "", f'{POSITION}="0"')
    # recorded with vLLM's 0-based "position" label, so every engine's series read alike
    per_pos = (f'sum by ({by}, position) (label_replace(rate({select(ACCEPTED_POS, matchers)}[{window}]), '
               f'"position", "$1", "{POSITION}", "(.*)"))')
    return {
        "acceptance_rate": f"{rate(ACCEPTED_POS)}\n/\n{rate(DRAFTED_POS)}",
        "acceptance_length": f"1 + {rate(ACCEPTED_POS)}\n/\n{drafts}",
        "acceptance_per_position": f"{per_pos}\n/ ignoring (position) group_left ()\n{drafts}",
        "draft_tokens_per_step": f"{rate(DRAFTED_POS)}\n/\n{drafts}",
        "running_requests_per_instance": running_per_instance(RUNNING, matchers, by, per_instance, window),
    }
