"""
* ``sglang:spec_accept_length`` — mean acceptance length (accepted drafts + the bonus
  token per verify) over SGLang's last logging period;
* ``sglang:spec_accept_rate`` — accepted draft tokens / proposed draft tokens, same period;
* newer releases also show ``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens``.

Labels include ``model_name`` and the ranks ``tp_rank``, ``dp_rank``...; tensor-parallel
ranks repeat the same figure, so only ``tp_rank="0"`` (or unlabelled) series are read, and
data-parallel ranks are averaged. Gauges carry no counts, so the window's figure is the
plain mean of the samples taken while speculation was reporting (value >= 1); it cannot
be weighted by drafts. The acceptance handed to ``recommend`` is the i.i.d. alpha whose
m(K) equals that mean (:meth:`Acceptance.from_mean_length`), and the document says so.

K is taken, in this order, from ``(length - 1) / rate`` (rounded), ``sglang:spec_num_steps``,
or the caller's ``num_speculative_tokens``.

Operating point: ``sglang:num_running_reqs`` (summed over DP ranks at each sample), the
deltas of ``sglang:prompt_tokens_histogram``, ``sglang:generation_tokens_histogram`` (when
SGLang runs with token histograms on) and ``sglang:inter_token_latency_seconds``.

"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import spectune.documents.exposition as _exposition
from spectune.base.errors import (
    BadBodyFault,
    NoSpeculativeTraffic,
    ObserveUsageError,
    SpeculationNotEnabled,
)
from spectune.base.limits import MAX_GAMMA
from spectune.core.acceptance import Acceptance
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
    histogram_summary,
    iso,
)
from spectune.documents.window import Capture, HistogramDelta, Segment, histogram_delta, split_segments
from spectune.engines.promql import running_per_instance, select
from spectune.engines.sglang.defaults import NAME

# --------------------------------------------------------------------------- metrics
PREFIX = "sglang:"
ACCEPT_LENGTH = "sglang:spec_accept_length"
SPEC_METRIC = ACCEPT_LENGTH  # shown only while speculating
ACCEPT_RATE = "sglang:spec_accept_rate"
NUM_STEPS = "sglang:spec_num_steps"
RUNNING = "sglang:num_running_reqs"
PROMPT = "sglang:prompt_tokens_histogram"
GENERATION = "sglang:generation_tokens_histogram"
ITL = "sglang:inter_token_latency_seconds"
# Every metric read, by type (Prometheus queries them by type: spectune.observe.prometheus).
COUNTERS: tuple[str, ...] = ()
HISTOGRAMS: tuple[str, ...] = (PROMPT, GENERATION, ITL)
GAUGES: tuple[str, ...] = (ACCEPT_LENGTH, ACCEPT_RATE, NUM_STEPS, RUNNING)
RESET_COUNTER: str | None = None  # no counter: gauges only
SPECULATION_NAMED = ACCEPT_LENGTH  # as messages name it
JSON_METRICS = None  # its /metrics is an exposition, always
SPECULATION_SERIES: tuple[str, ...] = (ACCEPT_LENGTH,)  # sampled in a window: the server speculates
METRICS = "sglang:spec_accept_length / spec_accept_rate gauges (means, no per-position data)"
NO_POSITIONS = ("SGLang reports only the mean acceptance length and rate (gauges), no per-position "
                "acceptance; the acceptance given to recommend is the i.i.d. alpha matching the "
                "mean length, not measured per position")


def is_sglang(expo: Exposition) -> bool:
    return _exposition.has_prefix(expo, PREFIX)


def resolve_model(expo: Exposition, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them."""
    return _exposition.resolve_model(expo, PREFIX, wanted)


def _select(model: str | None) -> Callable[[Series], bool]:
    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None) and s.label("tp_rank") in ("0", None) \
            and s.label("pp_rank") in ("0", None)

    return where


def check_metrics(expo: Exposition, model: str | None) -> None:
    """Raise :class:`SpeculationNotEnabled` when the speculative gauges are absent."""
    if not expo.get(ACCEPT_LENGTH, _select(model)):
        raise SpeculationNotEnabled("this SGLang server shows no sglang:spec_accept_length: "
                                    "speculative decoding is not enabled (or metrics are too old)")


def open_window(expo: Exposition, model_name: str | None) -> tuple[str | None, bool]:
    """From the first scrape, before the window: the model to observe, its speculative
    gauges checked (fails fast without them)."""
    model = resolve_model(expo, model_name)
    check_metrics(expo, model)
    return model, True


def analyse_window(capture: Capture, model: str | None, opened: Any = None,
                   num_speculative_tokens: int | None = None) -> Observation:
    """:func:`analyse`, given what :func:`open_window` found (None: checked on the last scrape)."""
    return analyse(capture, model, num_speculative_tokens, checked=bool(opened))


def _mean(expo: Exposition, name: str, where: Callable[[Series], bool]) -> float | None:
    vals = [s.value for s in expo.get(name, where)]
    return sum(vals) / len(vals) if vals else None


def _hist(snaps: Sequence[Exposition], segs: Sequence[Segment], name: str,
          where: Callable[[Series], bool]) -> HistogramDelta | None:
    total: HistogramDelta | None = None
    for g in segs:
        h = histogram_delta(snaps[g.first], snaps[g.last], name, where)
        if h is not None:
            total = h if total is None else total + h
    return total


def analyse(capture: Capture, model: str | None, num_speculative_tokens: int | None = None, *,
            checked: bool = False) -> Observation:
    """The Observation of one captured window of an SGLang server. ``checked``: the caller
    already ran :func:`check_metrics` (on the first scrape); otherwise it runs here on the last."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = _select(model)
    if not checked:
        check_metrics(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)
    seconds = times[-1] - times[0]

    lengths, rates, steps = [], [], []
    for e in snaps:
        length = _mean(e, ACCEPT_LENGTH, where)
        for name, value, lo, hi in ((ACCEPT_LENGTH, length, 0.0, MAX_GAMMA + 1.0),
                                    (ACCEPT_RATE, _mean(e, ACCEPT_RATE, where), 0.0, 1.0),
                                    (NUM_STEPS, _mean(e, NUM_STEPS, where), 0.0, float(MAX_GAMMA))):
            if value is not None and not lo <= value <= hi:  # NaN fails too
                raise BadBodyFault(f"{name} is {value:g}; a {'rate' if hi == 1.0 else 'length'} in "
                                   f"[{lo:g}, {hi:g}] was expected")
        if length is None or length < 1.0:  # 0: nothing reported for this period
            continue
        lengths.append(length)
        rate = _mean(e, ACCEPT_RATE, where)
        if rate is not None:
            rates.append(rate)
        st = _mean(e, NUM_STEPS, where)
        if st is not None and st >= 1:
            steps.append(st)
    if not lengths:
        raise NoSpeculativeTraffic(
            f"no speculative data in the window: sglang:spec_accept_length was 0 in all "
            f"{len(snaps)} samples over {seconds:.1f} s; SGLang's gauges cannot tell idle "
            "speculation from speculation that is switched off")
    tau = sum(lengths) / len(lengths)
    rate_mean = sum(rates) / len(rates) if rates else None
    if rate_mean and rate_mean > 0 and tau > 1:
        k = max(1, round((tau - 1.0) / rate_mean))
        k_from = "(mean length - 1) / mean rate"
    elif steps:
        k = round(sum(steps) / len(steps))
        k_from = "sglang:spec_num_steps"
    elif num_speculative_tokens:
        k = num_speculative_tokens
        k_from = "--num-speculative-tokens"
    else:
        raise ObserveUsageError("SGLang does not show the draft length here; give it with "
                                "--num-speculative-tokens K")
    if not 1 <= k <= MAX_GAMMA:
        raise BadBodyFault(f"SGLang's gauges give a draft length K = {k} ({k_from}); spectune evaluates "
                           f"1 to {MAX_GAMMA}")
    notes.append(f"K = {k} from {k_from}")
    notes.append(f"SGLang gauges hold the mean of SGLang's last logging period; the window's figure "
                 f"is the unweighted mean of {len(lengths)} samples that reported (value >= 1)")
    tau_c = min(max(tau, 1.0), k + 1.0)
    version = capture.engine_version
    vtxt = f"SGLang {version}" if version else "SGLang"
    mtxt = f", model {model}" if model else ""
    a = Acceptance.from_mean_length(
        tau_c, k, f"measured: {vtxt} at {capture.source}{mtxt}, {iso(times[0])} + {seconds:.0f} s "
                  "(no per-position data): i.i.d. alpha from mean acceptance length")
    basis = "one segment (no counter reset)" if len(segs) == 1 else \
        f"{len(segs)} segments (counter resets); gauges averaged over all samples"
    spec = Speculation(None, None, None, k, None, tau, rate_mean, None, NO_POSITIONS, basis)
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    missing = [n for n, h in (("prompt", PROMPT), ("generation", GENERATION))
               if not snaps[-1].has(h + "_count")]
    note = "tokens per engine step: not exposed by SGLang"
    if missing:
        note += f"; {' and '.join(missing)} lengths: not exposed (SGLang's token histograms are off)"
    op = OperatingPoint(
        running=distribution(running),
        prompt_tokens=histogram_summary(_hist(snaps, segs, PROMPT, where)),
        generation_tokens=histogram_summary(_hist(snaps, segs, GENERATION, where)),
        iteration_tokens=None,
        inter_token_latency_seconds=histogram_summary(_hist(snaps, segs, ITL, where)),
        note=note)
    return Observation(
        engine=EngineInfo(NAME, version, METRICS),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), seconds, capture.interval_seconds, len(snaps),
                      capture.failed_samples),
        speculation=spec,
        segments=tuple(SegmentInfo(iso(g.start) or "", iso(g.end) or "", g.seconds, g.samples, None, None,
                                   None, g.reset_before) for g in segs),
        operating_point=op,
        acceptance=AcceptanceInfo("mean-length", a.rates, a.source),
        notes=tuple(notes),
    )


def recording_rules(window: str, matchers: str, by: str, per_instance: str) -> dict[str, str]:
    """PromQL for ``spectune rules``: SGLang shows gauges only, so the means over ``window`` (a
    Prometheus duration) of the samples taken while it reports speculation (length >= 1), one
    tensor / pipeline rank, data-parallel ranks averaged; and the running requests per instance."""
    w = window
    ranks = (matchers, 'tp_rank=~"0|"', 'pp_rank=~"0|"')  # one TP / PP rank; DP ranks averaged
    length, rate, steps = (select(n, *ranks) for n in (ACCEPT_LENGTH, ACCEPT_RATE, NUM_STEPS))
    mean_length = f"avg by ({by}) (avg_over_time(({length} >= 1)[{w}:]))"
    mean_rate = f"avg by ({by}) (avg_over_time(({rate} and {length} >= 1)[{w}:]))"
    return {
        "acceptance_rate": mean_rate,
        "acceptance_length": mean_length,
        "draft_tokens_per_step": f"avg by ({by}) (avg_over_time(({steps} >= 1)[{w}:]))\nor\n"
                                 f"({mean_length} - 1)\n/\n({mean_rate} > 0)",
        "running_requests_per_instance": running_per_instance(RUNNING, ", ".join(m for m in ranks if m), by,
                                                              per_instance, w),
    }
