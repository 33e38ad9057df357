"""vLLM's ``/metrics``: speculative-decoding counters, the operating point, model names.

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

Step timing (:class:`~spectune.observe.observation.StepTiming`): V1 observes one
inter-token latency per request per decode step (all tokens a step emits for a request
count as one), so its window delta gives the decode steps summed over requests (count)
and the request-seconds spent decoding (sum); by Little's law the mean number of requests
in decode is that sum over the window's length, exact for the window, where 5-second
samples of the ``num_requests_running`` gauge miss short bursts. Engine steps are the
``iteration_tokens_total`` count. Without any ``spec_decode`` metric the server runs
plain decode: the window is recorded without acceptance (``flavour`` ``none``), which is
what calibration needs as its baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

import spectune.observe.exposition as _exposition
from spectune.acceptance import Acceptance
from spectune.limits import MAX_POSITIONS
from spectune.observe.exposition import Exposition, Series
from spectune.observe.faults import BadBodyFault, NoSpeculativeTraffic, SpeculationNotEnabled
from spectune.observe.observation import (
    AcceptanceInfo,
    EngineInfo,
    Observation,
    OperatingPoint,
    SegmentInfo,
    Source,
    Speculation,
    StepTiming,
    Window,
    distribution,
    histogram_summary,
    iso,
    speculation,
)
from spectune.observe.window import (
    Capture,
    HistogramDelta,
    Segment,
    Select,
    histogram_delta,
    split_segments,
    summed_delta,
)

PREFIX = "vllm:"
DRAFTS = "vllm:spec_decode_num_drafts_total"
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

V1_METRICS = "vllm:spec_decode_* counters (V1 engine, per-position)"
V0_METRICS = "vllm:spec_decode_* counters (V0 engine: accepted/draft/emitted, no per-position)"
PLAIN_METRICS = "vllm: step histograms only (speculation off)"


def is_vllm(expo: Exposition) -> bool:
    return _exposition.has_prefix(expo, PREFIX)


def model_names(expo: Exposition) -> list[str]:
    """The ``model_name`` label values seen on any ``vllm:`` sample."""
    return _exposition.model_names(expo, PREFIX)


def resolve_model(expo: Exposition, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them."""
    return _exposition.resolve_model(expo, PREFIX, wanted)


def _select(model: str | None) -> Callable[[Series], bool] | None:
    if model is None:
        return None

    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None)

    return where


def flavour(expo: Exposition, model: str | None) -> str:
    """``v1`` or ``v0`` spec-decode metrics, or ``none`` (plain decode) when the server shows
    none but does show its step histograms; raises :class:`SpeculationNotEnabled` otherwise."""
    where = _select(model)
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
            shown = pos if pos is None or len(pos) <= 20 else pos[:17] + "..."
            raise BadBodyFault(f"{PER_POS} has position={shown!r}; expected a whole number from 0 to "
                               f"{MAX_POSITIONS - 1}")
        out[int(pos)] = out.get(int(pos), 0.0) + s.value
    return out


def _pos_delta(first: Exposition, last: Exposition, where: Select | None) -> dict[int, float]:
    a, b = _positions(first, where), _positions(last, where)
    return {p: max(0.0, v - a.get(p, 0.0)) for p, v in b.items()}


def _hist(snaps: Sequence[Exposition], segs: Sequence[Segment], names: tuple[str, ...],
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


class _Counts(NamedTuple):
    """The spec-decode counter deltas of one segment."""

    segment: Segment
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: dict[int, float]  # 0-based position -> accepted there (V1 only)
    emitted: float | None           # V0 only: emitted tokens (drafts = emitted - accepted)


def analyse(capture: Capture, model: str | None, kind: str | None = None) -> Observation:
    """The Observation of one captured window of a vLLM server. ``kind`` is the
    :func:`flavour` the caller already found (on the first scrape); None: found here on the last."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = _select(model)
    if kind is None:
        kind = flavour(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)

    # ---- per segment
    rows: list[_Counts] = []
    for g in segs:
        e0, e1 = snaps[g.first], snaps[g.last]
        acc = summed_delta(e0, e1, ACCEPTED, where) or 0.0
        dtok = summed_delta(e0, e1, DRAFT_TOKENS, where) or 0.0
        if kind == "v1":
            rows.append(_Counts(g, summed_delta(e0, e1, DRAFTS, where) or 0.0, dtok, acc,
                                _pos_delta(e0, e1, where), None))
        else:
            emitted = summed_delta(e0, e1, V0_EMITTED, where)
            rows.append(_Counts(g, (emitted - acc) if emitted is not None else 0.0, dtok, acc, {}, emitted))

    seg_info = tuple(SegmentInfo(iso(r.segment.start) or "", iso(r.segment.end) or "", r.segment.seconds,
                                 r.segment.samples, r.drafts, r.draft_tokens, r.accepted,
                                 r.segment.reset_before) for r in rows)
    seconds = times[-1] - times[0]
    if len(segs) > 1:
        notes.append(f"counter reset{'s' if len(segs) > 2 else ''} in the window: split into "
                     f"{len(segs)} segments; the interval across each reset is excluded")
    for g in segs:
        if g.samples == 1 and len(segs) > 1:
            notes.append(f"segment starting {iso(g.start)} has a single sample: no deltas from it")

    version = capture.engine_version
    if kind == "none":
        return _plain(capture, model, segs, seg_info, notes)

    # ---- which segments make the acceptance
    if kind == "v0" and all(r.emitted is None for r in rows):
        raise SpeculationNotEnabled(
            "these vLLM V0 metrics lack vllm:spec_decode_num_emitted_tokens_total, so the number of "
            "drafts (emitted - accepted) cannot be derived")
    active = [r for r in rows if r.drafts > 0]
    if not active:
        about = f" for model {model!r}" if model else ""
        raise NoSpeculativeTraffic(
            f"no speculative traffic in the window{about}: 0 drafts in {seconds:.1f} s "
            f"({len(snaps)} samples); speculation is enabled (the counters exist) but nothing "
            "was drafted: send traffic or widen --window")
    ks = {max(r.per_position) + 1 if r.per_position else None for r in active}
    if len(segs) == 1:
        basis = "one segment (no counter reset)"
        chosen = active
    elif len(ks) == 1:
        basis = f"summed over {len(active)} of {len(segs)} segments (counter resets excluded)"
        chosen = active
    else:
        best = max(active, key=lambda r: r.drafts)
        chosen = [best]
        basis = (f"the segment with most drafts ({iso(best.segment.start)}, {best.drafts:g} drafts): "
                 "segments report different numbers of positions, so they are not summed")
    drafts = sum(r.drafts for r in chosen)
    dtok = sum(r.draft_tokens for r in chosen)
    acc = sum(r.accepted for r in chosen)
    per_pos: dict[int, float] = {}
    for r in chosen:
        for p, v in r.per_position.items():
            per_pos[p] = per_pos.get(p, 0.0) + v
    k_pos = max(per_pos) + 1 if per_pos else None
    accepted_pp = tuple(per_pos.get(i, 0.0) for i in range(k_pos)) if k_pos else ()

    vtxt = f"vLLM {version}" if version else "vLLM"
    mtxt = f", model {model}" if model else ""
    when = f"{iso(times[0])} + {seconds:.0f} s"
    if kind == "v1":
        spec = speculation(drafts, dtok, acc, accepted_pp, k_pos, basis)
        if k_pos and drafts > 0 and dtok < drafts * k_pos - 0.5:
            notes.append(f"mean draft length {dtok / drafts:.2f} < K = {k_pos}: some drafts were "
                         "shorter than K (e.g. n-gram matches near the end of the context); "
                         "per-position rates count a missing draft token as not accepted")
        assert spec.per_position is not None
        acceptance = AcceptanceInfo(
            "per-position", spec.per_position.conditional,
            f"measured: {vtxt} at {capture.source}{mtxt}, {when}, {drafts:g} drafts "
            "(per-position counters)")
    else:
        k = round(dtok / drafts) if drafts > 0 else None
        tau = 1.0 + acc / drafts
        spec = Speculation(drafts, dtok, acc, k, dtok / drafts, tau, acc / dtok if dtok else None,
                           None, "vLLM V0 metrics have no per-position counts; the acceptance "
                                 "given to recommend is the i.i.d. alpha matching the mean length",
                           basis)
        if k is None or k < 1:
            raise NoSpeculativeTraffic("vLLM V0 metrics: cannot derive the draft length from the window")
        iid = Acceptance.from_mean_length(min(max(tau, 1.0), k + 1.0), k,
                                          f"measured: {vtxt} V0 at {capture.source}{mtxt}, {when}: "
                                          "i.i.d. alpha from mean acceptance length")
        acceptance = AcceptanceInfo("mean-length", iid.rates, iid.source)

    op, steps = _operating_point(capture, model, segs, spec)
    return Observation(
        engine=EngineInfo("vllm", version, V1_METRICS if kind == "v1" else V0_METRICS),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), seconds, capture.interval_seconds, len(snaps),
                      capture.failed_samples),
        speculation=spec,
        segments=seg_info,
        operating_point=op,
        acceptance=acceptance,
        notes=tuple(notes),
        steps=steps,
    )


def _operating_point(capture: Capture, model: str | None, segs: Sequence[Segment],
                     spec: Speculation | None) -> tuple[OperatingPoint, StepTiming]:
    """The operating point (all samples for the gauge; in-segment deltas for histograms) and
    the step timing of the window."""
    snaps = [s.exposition for s in capture.snapshots]
    where = _select(model)
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    prompt = _hist(snaps, segs, (PROMPT,), where)
    gen = _hist(snaps, segs, (GENERATION,), where)
    it = _hist(snaps, segs, (ITERATION,), where)
    itl = _hist(snaps, segs, ITL, where)
    op = OperatingPoint(
        running=distribution(running),
        prompt_tokens=histogram_summary(prompt),
        generation_tokens=histogram_summary(gen),
        iteration_tokens=histogram_summary(it),
        inter_token_latency_seconds=histogram_summary(itl),
        note="prompt/generation lengths are those of requests that finished in the window; "
             "running requests are sampled at each scrape")
    covered = sum(g.seconds for g in segs)  # seconds inside segments: what the deltas cover
    generated: float | None = None
    for g in segs:
        d = summed_delta(snaps[g.first], snaps[g.last], GENERATED, where)
        if d is not None:
            generated = (generated or 0.0) + d
    seq_steps = itl.count if itl is not None and itl.count > 0 else None
    engine_steps = it.count if it is not None and it.count > 0 else None
    decode_s = itl.sum if itl is not None else None
    drafted = spec.draft_tokens if spec is not None else 0.0
    drafts = spec.drafts if spec is not None else 0.0
    gauge = op.running.mean if op.running is not None else None
    if decode_s is not None and covered > 0:
        mean_running: float | None = decode_s / covered
        basis = ("Little's law: inter-token latency sum / window seconds (request-seconds in decode "
                 "per second)")
    else:
        mean_running, basis = gauge, "sampled vllm:num_requests_running (no inter-token latencies)"
    ctx = None
    if prompt is not None and gen is not None and prompt.mean is not None and gen.mean is not None:
        ctx = prompt.mean + gen.mean / 2.0
    steps = StepTiming(
        engine_steps=engine_steps,
        tokens_per_step=it.mean if it is not None else None,
        sequence_steps=seq_steps,
        sequences_per_step=seq_steps / engine_steps if seq_steps and engine_steps else None,
        step_seconds=itl.mean if itl is not None else None,
        decode_seconds=decode_s,
        mean_running=mean_running,
        mean_running_basis=basis,
        gauge_mean_running=gauge,
        decode_context_tokens=ctx,
        verify_width=1.0 + (drafted or 0.0) / seq_steps if seq_steps else None,
        draft_fraction=min(1.0, (drafts or 0.0) / seq_steps) if seq_steps and spec is not None else None,
        generated_tokens=generated,
        time_per_output_token_seconds=histogram_summary(_hist(snaps, segs, (TPOT,), where)),
        decode_time_seconds=histogram_summary(_hist(snaps, segs, (DECODE_TIME,), where)),
    )
    return op, steps


def _plain(capture: Capture, model: str | None, segs: Sequence[Segment],
           seg_info: tuple[SegmentInfo, ...], notes: list[str]) -> Observation:
    """A window of a vLLM server running without speculation: step timing, no acceptance."""
    times = [s.time for s in capture.snapshots]
    seg_info = tuple(replace(g, drafts=None, draft_tokens=None, accepted_tokens=None) for g in seg_info)
    spec = Speculation(None, None, None, None, None, None, None, None,
                       "speculation is off on this server", "speculation off (no vllm:spec_decode_* metrics)")
    op, steps = _operating_point(capture, model, segs, None)
    if not steps.sequence_steps:
        notes.append("no decode steps in the window: send traffic or widen --window")
    notes.append("plain-decode window (speculation off): no acceptance; step timing for "
                 "`spectune calibrate`")
    return Observation(
        engine=EngineInfo("vllm", capture.engine_version, PLAIN_METRICS),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), times[-1] - times[0], capture.interval_seconds,
                      len(times), capture.failed_samples),
        speculation=spec,
        segments=seg_info,
        operating_point=op,
        acceptance=None,
        notes=tuple(notes),
        steps=steps,
    )
