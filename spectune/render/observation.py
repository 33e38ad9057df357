"""Human table (and markdown) of an ``Observation`` document; :data:`spectune.render.formats.TABLES`
names it for the kind ``Observation``."""

from __future__ import annotations

from typing import Any

from spectune.documents.envelope import Document
from spectune.render.formats import grid


def _n(x: Any, fmt: str = "{:,.0f}") -> str:
    if x is None:
        return "n/a"
    return fmt.format(x)


def _hist_row(h: dict[str, Any] | None, what: str, unit: str, scale: float = 1.0, digits: int = 1) -> str:
    if not h:
        return "unknown"
    mean = h.get("mean")
    if not h.get("count") or mean is None:
        return f"no {what} in the window"
    return f"mean {mean * scale:.{digits}f} {unit} over {h['count']:,} {what}"


def _step_rows(t: dict[str, Any]) -> list[list[str]]:
    def f(key: str, spec: str = "{:,.2f}", scale: float = 1.0) -> str:
        v = t.get(key)
        return "n/a" if v is None else spec.format(v * scale)

    return [
        ["engine steps", f("engine_steps", "{:,.0f}")],
        ["tokens per step", f("tokens_per_step")],
        ["sequences per decode step", f("sequences_per_step")],
        ["decode step (mean inter-token latency)", f("step_seconds", "{:.2f} ms", 1e3)],
        ["mean running (Little's law)", f("mean_running")],
        ["mean running (gauge samples)", f("gauge_mean_running")],
        ["context while decoding", f("decode_context_tokens", "{:,.0f} tokens")],
        ["verify width (1 + draft tokens / sequence step)", f("verify_width", "{:.3f}")],
        ["share of sequence steps with a draft", f("draft_fraction", "{:.1%}")],
    ]


def observation_table(doc: Document, fmt: str) -> str:
    eng, win, spec = doc["engine"], doc["window"], doc["speculation"]
    op, acc = doc["operating_point"], doc["acceptance"]
    md = fmt == "markdown"
    ver = eng.get("version") or "version not shown"
    model = doc.get("model_name") or "model not labelled"
    title = f"{eng['name']} ({ver}), {model}, {doc['source']['kind']} {doc['source']['where']}"
    if win.get("start"):
        secs = "n/a" if win.get("seconds") is None else f"{win['seconds']:.1f}"
        span = f"window {win['start']} .. {win['end']} ({secs} s, {win['samples']} samples"
        span += f", every {win['interval_seconds']:g} s" if win.get("interval_seconds") else ""
        span += f", {win['failed_samples']} failed)" if win.get("failed_samples") else ")"
    else:
        secs = f"~{win['seconds']:.1f} s of logging periods" if win.get("seconds") else "duration unknown"
        span = f"{win['samples']} log line(s), {secs}"
    out = [f"**{title}**" if md else title, "", span, f"metrics: {eng['metrics']}", ""]

    k = spec.get("num_speculative_tokens")
    mdl = spec.get("mean_draft_length")
    rows = [
        ["drafts (verify passes with drafts)", _n(spec.get("drafts"))],
        ["draft tokens", _n(spec.get("draft_tokens"))],
        ["accepted tokens", _n(spec.get("accepted_tokens"))],
        ["K (positions)", _n(k)],
        ["mean draft length", "n/a" if mdl is None else f"{mdl:.3f}"],
        ["mean acceptance length (1 + accepted/drafts)", _n(spec.get("mean_acceptance_length"), "{:.3f}")],
        ["draft acceptance rate (accepted/draft tokens)",
         _n(spec.get("draft_acceptance_rate"), "{:.1%}")],
    ]
    out.append(grid(rows, ["speculation", "value"], fmt))
    pp = spec.get("per_position")
    if pp:
        cols = zip(pp["accepted"], pp["marginal"], pp["conditional"], strict=True)
        prow = [[i + 1, f"{a:,.1f}" if a % 1 else f"{a:,.0f}", f"{m:.3f}", f"{c:.3f}"]
                for i, (a, m, c) in enumerate(cols)]
        out.append(grid(prow, ["position", "accepted", "accepted/drafts (vLLM)", "conditional a_i"], fmt))
    else:
        out.append(f"per-position acceptance: not available. {spec.get('per_position_note') or ''}\n")
    out.append(f"basis: {spec['basis']}\n")

    run = op.get("running")
    dist = ", ".join(f"{d['running']}: {d['samples']}" for d in run["distribution"]) if run else ""
    orows = [
        ["running requests", f"mean {run['mean']:.2f} over {run['samples']} samples ({dist})" if run
         else "unknown"],
        ["prompt length", _hist_row(op.get("prompt_tokens"), "finished requests", "tokens")],
        ["generation length", _hist_row(op.get("generation_tokens"), "finished requests", "tokens")],
        ["tokens per engine step", _hist_row(op.get("iteration_tokens"), "steps", "tokens", digits=2)],
        ["inter-token latency", _hist_row(op.get("inter_token_latency_seconds"), "tokens", "ms", 1e3, 2)],
    ]
    out.append(grid(orows, ["operating point", "value"], fmt))
    if op.get("note"):
        out.append(f"({op['note']})\n")
    segs = doc.get("segments") or []
    if len(segs) > 1:
        srows = [[i + 1, s["start"], f"{s['seconds']:.1f}", s["samples"], _n(s.get("drafts")),
                  _n(s.get("accepted_tokens")), s.get("reset_before") or ""] for i, s in enumerate(segs)]
        out.append(grid(srows, ["segment", "start", "seconds", "samples", "drafts", "accepted",
                                "reset before it"], fmt))
    steps = doc.get("steps")
    if steps:
        out.append(grid(_step_rows(steps), ["engine steps", "value"], fmt))
    if acc:
        rates = ", ".join(f"{r:.3f}" for r in acc["conditional"])
        out.append(f"acceptance for recommend ({acc['kind']}): a = [{rates}]")
        out.append(f"  source: {acc['source']}")
    else:
        out.append("acceptance: none (speculation off: a plain-decode window, for `spectune calibrate`)")
    if doc.get("speculative_config"):
        out.append(f"speculative config (as given): {doc['speculative_config']}")
    for n in doc.get("notes") or []:
        out.append(f"note: {n}")
    return "\n".join(out) + "\n"


def _mix(run: dict[str, Any] | None) -> str:
    """Batch mix of busy samples: ``4: 60%, 8: 40%`` (idle share aside)."""
    if not run or not run.get("samples"):
        return "unknown"
    busy = [(d["running"], d["samples"]) for d in run["distribution"] if d["running"] > 0]
    n = sum(c for _, c in busy)
    if not n:
        return "idle"
    text = ", ".join(f"{b}: {c / n:.0%}" for b, c in busy[:6]) + (", ..." if len(busy) > 6 else "")
    idle = 1 - n / run["samples"]
    return text + (f" (idle {idle:.0%})" if idle > 0 else "")


def fleet_observation_table(doc: Document, fmt: str) -> str:
    src, win = doc["source"], doc["window"]
    head = (f"Prometheus {src['prometheus']} {src.get('selector') or '(no selector)'}, window "
            f"{win['start']} .. {win['end']} ({win['seconds']:g} s, gauges every {win['step_seconds']:g} s), "
            f"grouped by {', '.join(src['by'])}")
    rows = []
    for g in doc["groups"]:
        spec, op, acc = g["speculation"], g["operating_point"], g["acceptance"]
        labels = ", ".join(f"{k}={v}" for k, v in (g.get("labels") or {}).items())
        ctx = None
        if op.get("prompt_tokens") and op.get("generation_tokens"):
            p, q = op["prompt_tokens"].get("mean"), op["generation_tokens"].get("mean")
            ctx = p + q if p is not None and q is not None else None
        rows.append([labels, g["engine"]["name"], _n(spec.get("drafts")),
                     _n(spec.get("mean_acceptance_length"), "{:.3f}"),
                     ", ".join(f"{a:.3f}" for a in acc["conditional"]), _mix(op.get("running")),
                     _n(ctx, "{:,.0f}")])
    out = [f"**{head}**" if fmt == "markdown" else head, "",
           grid(rows, ["group", "engine", "drafts", "mean acc. length", "a_i", "batch mix",
                       "context"], fmt)]
    for n in doc.get("notes") or []:
        out.append(f"note: {n}")
    return "\n".join(out) + "\n"
