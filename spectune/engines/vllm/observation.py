"""The Observation of a captured window of a vLLM server: counts per segment (checked as every
count is, :func:`spectune.documents.counts.check_segment`), the acceptance, the operating point and
step timing; metric names and meanings in :mod:`spectune.engines.vllm.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from spectune.base.errors import NoSpeculativeTraffic, SpeculationNotEnabled
from spectune.core.acceptance import Acceptance
from spectune.documents.counts import check_segment
from spectune.documents.exposition import Exposition
from spectune.documents.observation import (
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
from spectune.documents.window import (
    Capture,
    Segment,
    split_segments,
    summed_delta,
)
from spectune.engines.vllm.metrics import (
    ACCEPTED,
    DECODE_TIME,
    DRAFT_TOKENS,
    DRAFTS,
    GENERATED,
    GENERATION,
    ITERATION,
    ITL,
    PLAIN_METRICS,
    PREFIX,
    PROMPT,
    RUNNING,
    TPOT,
    V0_EMITTED,
    V0_METRICS,
    V0_NO_POSITIONS,
    V1_METRICS,
    V1_NO_POSITIONS,
    SegmentCounts,
    flavour,
    positions_delta,
    resolve_model,
    select_model,
    summed_histogram,
)
from spectune.engines.vllm.releases import NAME


def open_window(expo: Exposition, model_name: str | None) -> tuple[str | None, str]:
    """From the first scrape, before the window: the model to observe and the metrics'
    :func:`flavour` (fails fast when the server shows neither)."""
    model = resolve_model(expo, model_name)
    return model, flavour(expo, model)


def analyse_window(capture: Capture, model: str | None, opened: Any = None,
                   num_speculative_tokens: int | None = None) -> Observation:
    """:func:`analyse`, given what :func:`open_window` found (None: found on the last scrape).
    ``num_speculative_tokens`` is not needed: vLLM's counters give the draft length."""
    return analyse(capture, model, opened)

def analyse(capture: Capture, model: str | None, kind: str | None = None) -> Observation:
    """The Observation of one captured window of a vLLM server. ``kind`` is the
    :func:`flavour` the caller already found (on the first scrape); None: found here on the last."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = select_model(model)
    if kind is None:
        kind = flavour(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)

    # ---- per segment
    rows: list[SegmentCounts] = []
    for g in segs:
        e0, e1 = snaps[g.first], snaps[g.last]
        acc = summed_delta(e0, e1, ACCEPTED, where) or 0.0
        dtok = summed_delta(e0, e1, DRAFT_TOKENS, where) or 0.0
        if kind == "v1":
            rows.append(SegmentCounts(g, summed_delta(e0, e1, DRAFTS, where) or 0.0, dtok, acc,
                                positions_delta(e0, e1, where), None))
        else:
            emitted = summed_delta(e0, e1, V0_EMITTED, where)
            drafts = (emitted - acc) if emitted is not None else 0.0
            rows.append(SegmentCounts(g, drafts, dtok, acc, {}, emitted))

    for i, r in enumerate(rows):  # the checks of counts however they came in (/metrics, Prometheus)
        acc, per_position, note = check_segment(r.drafts, r.draft_tokens, r.accepted, r.per_position,
                                                capture.source, capture.count_slack)
        rows[i] = r._replace(accepted=acc, per_position=per_position)
        notes += [note] if note else []
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
    spec = speculation(drafts, dtok, acc, accepted_pp, k_pos, basis)
    if kind == "v1" and spec.per_position is not None:
        if k_pos and drafts > 0 and dtok < drafts * k_pos - 0.5:
            notes.append(f"mean draft length {dtok / drafts:.2f} < K = {k_pos}: some drafts were "
                         "shorter than K (e.g. n-gram matches near the end of the context); "
                         "per-position rates count a missing draft token as not accepted")
        acceptance = AcceptanceInfo(
            "per-position", spec.per_position.conditional,
            f"measured: {vtxt} at {capture.source}{mtxt}, {when}, {drafts:g} drafts "
            "(per-position counters)")
    else:
        if kind == "v1":  # the drafts counters without their per-position series
            notes.append(V1_NO_POSITIONS)
        k = round(dtok / drafts) if drafts > 0 else None
        tau = 1.0 + acc / drafts
        spec = Speculation(drafts, dtok, acc, k, dtok / drafts, tau, acc / dtok if dtok else None,
                           None, V1_NO_POSITIONS if kind == "v1" else V0_NO_POSITIONS, basis)
        if k is None or k < 1:
            raise NoSpeculativeTraffic(f"vLLM {kind.upper()} metrics: cannot derive the draft length from "
                                       "the window")
        iid = Acceptance.from_mean_length(min(max(tau, 1.0), k + 1.0), k,
                                          f"measured: {vtxt} {kind.upper()} at {capture.source}{mtxt}, "
                                          f"{when}: i.i.d. alpha from mean acceptance length")
        acceptance = AcceptanceInfo("mean-length", iid.rates, iid.source)

    op, steps = _operating_point(capture, model, segs, spec)
    return Observation(
        engine=EngineInfo(NAME, version, V0_METRICS if kind == "v0" else V1_METRICS if spec.per_position
                          else V1_METRICS.replace("per-position", "no per-position series")),
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
    where = select_model(model)
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    prompt = summed_histogram(snaps, segs, (PROMPT,), where)
    gen = summed_histogram(snaps, segs, (GENERATION,), where)
    it = summed_histogram(snaps, segs, (ITERATION,), where)
    itl = summed_histogram(snaps, segs, ITL, where)
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
        time_per_output_token_seconds=histogram_summary(summed_histogram(snaps, segs, (TPOT,), where)),
        decode_time_seconds=histogram_summary(summed_histogram(snaps, segs, (DECODE_TIME,), where)),
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
        engine=EngineInfo(NAME, capture.engine_version, PLAIN_METRICS),
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
