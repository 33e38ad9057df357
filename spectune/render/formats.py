"""Every output format of every command: YAML, JSON, tables.

The library builds plain ``dict`` documents (:func:`spectune.documents.envelope.envelope`, re-exported
here for compatibility); :func:`render` turns them into text. The human table of a kind is
drawn by a function of this module registered with :func:`table_for`, or, for a table that
lives beside its data (``observe/table.py``), named in :data:`TABLES` and imported on first
use -- no data package registers a renderer as a side effect of being imported. YAML and
JSON are the document itself, keys in insertion order (the schema order), so identical
input gives byte-identical output.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

from spectune.core.uncertainty import band_words
from spectune.documents.envelope import API_VERSION, Document, envelope

__all__ = ["API_VERSION", "FORMATS", "TABLES", "Document", "envelope", "grid", "render", "table_for",
           "to_json", "to_yaml"]

FORMATS = ("table", "yaml", "json", "markdown")

TableFn = Callable[[Document, str], str]
_TABLES: dict[tuple[str, str], TableFn] = {}  # (kind, variant) -> renderer

# Tables that live outside this module: kind -> "module:function", imported when first drawn.
TABLES: dict[str, str] = {
    "Observation": "spectune.render.observation:observation_table",
    "Fleet": "spectune.render.observation:fleet_observation_table",
    "FleetReport": "spectune.render.fleet_table:fleet_report_table",
    "CheckSet": "spectune.render.fleet_table:check_set_table",
}


def table_for(kind: str, variant: str = "") -> Callable[[TableFn], TableFn]:
    """Register the human table/markdown renderer of one document kind; a ``variant``
    (``detail``, ``wide``) is a longer form printed on request or on a wide terminal."""

    def register(fn: TableFn) -> TableFn:
        _TABLES[(kind, variant)] = fn
        return fn

    return register


def table_function(kind: str, variant: str = "") -> TableFn | None:
    """The table/markdown renderer of ``kind`` (its ``variant`` where it has one); None when
    it has none (YAML is shown)."""
    fn_here = _TABLES.get((kind, variant)) or _TABLES.get((kind, ""))
    if fn_here is not None:
        return fn_here
    where = TABLES.get(kind)
    if where is None:
        return None
    module, _, name = where.partition(":")
    fn: TableFn = getattr(import_module(module), name)
    return fn


def _clean(value: Any) -> Any:
    """Plain Python scalars only (no NumPy types, no NaN) so YAML/JSON stay portable."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def to_json(doc: Document) -> str:
    return json.dumps(_clean(doc), indent=2, ensure_ascii=False) + "\n"


def to_yaml(doc: Document) -> str:
    import yaml

    return yaml.safe_dump(_clean(doc), sort_keys=False, allow_unicode=True, width=100)


def render(doc: Document, fmt: str, *, variant: str = "") -> str:
    """Text of ``doc`` in ``fmt`` (one of :data:`FORMATS`); ``variant`` picks another human
    table where the kind has one (else the default table). Once a network client ran, every
    string passes :func:`spectune.base.redact.gate_doc` first (no credential printed);
    every network client loads that module, other commands do not pay for it."""
    redact = sys.modules.get("spectune.base.redact")
    if redact is not None:
        doc = redact.gate_doc(doc)
    if fmt == "json":
        return to_json(doc)
    if fmt == "yaml":
        return to_yaml(doc)
    if fmt in ("table", "markdown"):
        fn = table_function(str(doc.get("kind")), variant)
        if fn is None:
            return to_yaml(doc)
        return fn(doc, fmt)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def grid(rows: list[list[Any]], headers: list[str], fmt: str) -> str:
    """A table in the terminal (``table``) or GitHub (``markdown``) style."""
    from tabulate import tabulate

    style = "github" if fmt == "markdown" else "simple"
    return tabulate(rows, headers=headers, tablefmt=style, disable_numparse=True) + "\n"


# --------------------------------------------------------------------------- human tables
def _si(x: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def feasible(p: dict[str, Any]) -> bool:
    """False for a point that cannot run at all (it carries ``feasible: false`` and a
    ``reason`` instead of gamma and speedup)."""
    return p.get("feasible", True) is not False and p.get("speedup") is not None


#: The mark of a point whose gain is marginal (``marginal_gain``), and its legend line.
MARGINAL_MARK = "†"
MARGINAL_LEGEND = (f"{MARGINAL_MARK} marginal gain: γ* speculates but the band's low end is below 1.0×, "
                   "so the gain may not be there (`spectune check` does not require speculation at "
                   "such a point, nor counts it as a certain win)")


def tie_rule(tolerance: float) -> str:
    """How gamma* breaks ties, for legends (spectune/core/recommend.py ``choose``)."""
    return (f"γ* is the smallest γ whose predicted speedup is within the tie tolerance "
            f"({tolerance * 100:g}%) of the best")


def _speedup(p: dict[str, Any]) -> str:
    """``2.56×`` or, when the point carries its prediction band, ``2.56× (2.30–2.80)``; a
    marginal gain ends with :data:`MARGINAL_MARK`."""
    text = f"{p['speedup']:.2f}×"
    if p.get("speedup_low") is not None and p.get("speedup_high") is not None:
        text += f" ({p['speedup_low']:.2f}–{p['speedup_high']:.2f})"
    return text + (f" {MARGINAL_MARK}" if p.get("marginal_gain") else "")


def _legend_lines(doc: Document) -> list[str]:
    """The tie rule, and the marginal-gain line when a point carries the mark."""
    lines = [tie_rule(doc["deployment"]["tie_tolerance"]) + ", so a deeper draft must buy more than that"]
    if any(p.get("marginal_gain") for p in doc["points"]):
        lines.append(MARGINAL_LEGEND)
    return lines


def _recommendation_head(doc: Document, fmt: str) -> str:
    dep = doc["deployment"]
    acc = doc["acceptance"]
    par = dep["parallelism"]
    title = (f"{dep['model']['name']} on {dep['gpu']['name']} (tp={par['tp']} ep={par['ep']} "
             f"dp={par['dp']}), drafter {dep['drafter']['name']} [{dep['drafter']['kind']}], "
             f"{dep['engine']['name']}")
    rates = ", ".join(f"{r:.2f}" for r in acc["conditional"])
    if fmt == "markdown":
        return f"**{title}**\n\nacceptance: {acc['source']} (a = {rates})\n\n\n"
    return f"{title}\nacceptance: {acc['source']} (a = {rates})\n\n"


def _footnotes(doc: Document) -> tuple[dict[tuple[int, int], str], list[str]]:
    """A footnote mark per infeasible point and the footnotes: one for every point that does
    not fit in GPU memory (with the first one's numbers), one per other distinct reason."""
    marks: dict[tuple[int, int], str] = {}
    keys: list[str] = []
    texts: list[str] = []
    for p in doc["points"]:
        if feasible(p):
            continue
        why = str(p.get("reason") or "not feasible")
        memory = why.startswith("needs ") and "available" in why
        key = "memory" if memory else why
        if key not in keys:
            keys.append(key)
            texts.append(f"does not fit in GPU memory: weights + KV cache of every sequence + the "
                         f"engine's reserve exceed it (batch {p['batch']} at context "
                         f"{p['context']:,} {why})" if memory else why)
        marks[(p["batch"], p["context"])] = f"[{keys.index(key) + 1}]"
    return marks, [f"[{k + 1}] {t}" for k, t in enumerate(texts)]


@table_for("Recommendation")
def _recommendation_table(doc: Document, fmt: str) -> str:
    return _recommendation_grid(doc, fmt, wide=False)


@table_for("Recommendation", "wide")
def _recommendation_wide(doc: Document, fmt: str) -> str:
    """On a wide terminal: each cell also gives the time per output token and the limiter."""
    return _recommendation_grid(doc, fmt, wide=True)


def _tpot(p: dict[str, Any], expected_tokens: list[float]) -> float:
    """Time per output token of one sequence with gamma*, seconds: step / tokens per verify."""
    return float(p["step_seconds"]) / expected_tokens[p["gamma"]]


def speedup_words(doc: Document) -> str:
    """What a Recommendation's speedups are: decode alone, or output throughput with prefill."""
    return ("output throughput speedup over plain serving, the prefill each step carries included"
            if doc["deployment"].get("workload", {}).get("serving") == "aggregated"
            else "decode throughput speedup over plain decode")


def _recommendation_grid(doc: Document, fmt: str, wide: bool) -> str:
    points = {(p["batch"], p["context"]): p for p in doc["points"]}
    m = doc["acceptance"]["expected_tokens"]
    marks, footnotes = _footnotes(doc)
    rows = []
    for b in doc["batch_sizes"]:
        row: list[Any] = [b]
        for s in doc["context_lengths"]:
            p = points[(b, s)]
            if (b, s) in marks:
                row.append(f"—  {marks[(b, s)]}")
            else:
                cell = f"{p['gamma']}  {_speedup(p)}" if p["speculate"] else "0  off"
                if wide:
                    cell += f"  {_tpot(p, m) * 1e3:.2f} ms  {p.get('limiter', '')}"
                row.append(cell)
        rows.append(row)
    headers = ["batch \\ context"] + [f"{s:,}" for s in doc["context_lengths"]]
    band = any(p.get("speedup_low") is not None for p in doc["points"])
    legend = (f"cell: γ* (best draft length) and predicted {speedup_words(doc)} (× = times faster"
              + (f"; (low–high) = {band_words(doc)}" if band else "") + "); '0  off' = speculation "
              "does not pay there; " + ("then time per output token of one sequence and the costliest "
                                        "part of the step; " if wide else "")
              + "rows: concurrent sequences, columns: context length in tokens; more per point: --detail")
    tail = [legend, *_legend_lines(doc), *footnotes]
    text = _recommendation_head(doc, fmt) + grid(rows, headers, fmt) + "\n" + "\n".join(tail) + "\n"
    if "ragged" in doc:
        text += "\n" + _ragged_table(doc, fmt)
    if "slo" in doc:
        text += "\n" + _slo_table(doc["slo"], fmt)
    return text


@table_for("Recommendation", "detail")
def _recommendation_detail(doc: Document, fmt: str) -> str:
    """One row per operating point: gamma*, speedup, time per output token and tokens/s with
    and without speculation, and the limiting component."""
    m = doc["acceptance"]["expected_tokens"]
    marks, footnotes = _footnotes(doc)
    rows = []
    for p in doc["points"]:
        b, s = p["batch"], p["context"]
        if (b, s) in marks:
            rows.append([b, f"{s:,}", "—", marks[(b, s)], "", "", "", "", ""])
            continue
        plain_tpot = p["plain_step_seconds"]
        tpot = _tpot(p, m)
        rows.append([b, f"{s:,}", p["gamma"] if p["speculate"] else "0 (off)", _speedup(p),
                     f"{tpot * 1e3:.2f}", f"{plain_tpot * 1e3:.2f}", f"{b / tpot:,.0f}",
                     f"{b / plain_tpot:,.0f}", p.get("limiter", "")])
    headers = ["batch", "context", "γ*", "speedup", "TPOT ms", "plain TPOT ms", "tok/s",
               "plain tok/s", "limited by"]
    legend = ("TPOT: time per output token of one sequence (step time / tokens per verify), ms; "
              "tok/s: decode tokens per second of the whole instance at that batch size; plain: "
              "without speculation; limited by: the costliest part of the speculative step")
    text = (_recommendation_head(doc, fmt) + grid(rows, headers, fmt) + "\n"
            + "\n".join([legend, *_legend_lines(doc), *footnotes]) + "\n")
    if "ragged" in doc:
        text += "\n" + _ragged_table(doc, fmt)
    if "slo" in doc:
        text += "\n" + _slo_table(doc["slo"], fmt)
    return text


def _ragged_table(doc: Document, fmt: str) -> str:
    """recommend --ragged: the four depth policies per point (seed 003)."""
    rows = []
    for p in doc["points"]:
        if "ragged" not in p:  # a point that does not fit in memory
            continue
        r = p["ragged"]
        rows.append([p["batch"], f"{p['context']:,}", f"{r['homogeneous_gamma']}  {r['homogeneous']:.2f}x",
                     f"{r['gated']:.2f}x", f"{r['ragged']:.2f}x  (mean {r['mean_ragged_depth']:.1f})",
                     f"{r['ragged_free']:.2f}x", f"{r['oracle']:.2f}x",
                     f"{(r['ragged'] / r['homogeneous'] - 1) * 100:+.1f}%"])
    gap = "\n" if fmt == "markdown" else ""
    head = f"ragged depths, rounds: {doc['ragged']['rounds']}\n{gap}"
    legend = ("speedup over plain decode; gated: one γ per step from the drafter's confidences; "
              "ragged: that γ trimmed per sequence; free: any per-sequence depths; oracle: perfect "
              "calibration\n")
    return head + grid(rows, ["batch", "context", "best single γ", "gated γ", "ragged (trimmed)",
                              "ragged (free)", "oracle", "ragged vs single"], fmt) + "\n" + legend + \
        f"note: {doc['ragged']['note']}\n"


def _slo_table(slo: Document, fmt: str) -> str:
    """recommend --tpot-slo: goodput per context."""

    def cell(op: Document | None) -> str:
        if op is None:
            return "none meets the SLO"
        return (f"B={op['batch']} γ={op['gamma']}: {op['tokens_per_second_per_gpu']:,.0f} tok/s/GPU, "
                f"TPOT {_ms(op['tpot_seconds'])}")

    rows = [[f"{p['context']:,}", cell(p["best"]), cell(p["batch_only"]),
             "" if p["speculation_gain"] is None else f"{p['speculation_gain']:.2f}x"]
            for p in slo["points"]]
    head = (f"goodput at TPOT <= {_ms(slo['tpot_seconds'])} (batch searched over "
            f"{slo['batch_search'][0]}..{slo['batch_search'][1]})\n" + ("\n" if fmt == "markdown" else ""))
    return head + grid(rows, ["context", "best (batch, γ)", "best without speculation",
                              "speculation gain"], fmt)


@table_for("WidthDepth")
def _widthdepth_table(doc: Document, fmt: str) -> str:
    w, d = doc["width"], doc["depth"]
    rows = []
    for name, sp in (("width", w), ("depth", d)):
        rows.append([name, f"{sp['batch']} x {sp['tokens_per_sequence']}",
                     f"{sp['distinct_experts_per_layer']:.1f}", _si(sp["expert_bytes"], "B"),
                     _si(sp["attention_bytes"], "B"), _si(sp["other_bytes"], "B"),
                     _ms(sp["step_seconds"]), f"{sp['tokens_per_step']:.2f}",
                     f"{sp['tokens_per_second']:,.0f}",
                     f"{sp['memory_gb']:,.1f} GB" + ("" if sp["fits"] else " (no fit)")])
    head = (f"{doc['model']} on {doc['gpu']}: {doc['positions']} positions per step at context "
            f"{doc['context']:,}; acceptance {doc['acceptance']}; routing {doc['routing']}\n\n")
    misfit = [f"{name} does not fit in memory: {sp['memory_note']}\n"
              for name, sp in (("width", w), ("depth", d)) if not sp["fits"]]
    tail = (f"\nwinner: {doc['winner']} (depth / width throughput = {doc['depth_over_width']:.3f})"
            + ("" if doc["drafter"] else "; drafting taken as free") + "\n" + "".join(misfit))
    return head + grid(rows, ["spend", "seqs x positions", "experts/layer", "expert bytes",
                              "attention bytes", "other bytes", "step", "tokens/step", "tokens/s",
                              "memory/GPU"], fmt) + tail


@table_for("StepCost")
def _cost_table(doc: Document, fmt: str) -> str:
    rows = [[c["name"], _si(c["flops"], "FLOP"), _si(c["bytes"], "B"), _ms(c["seconds"]),
             f"{c['share'] * 100:.1f}%", f"{c['intensity']:.1f}", c["bound"],
             f"{c['marginal_cost']:.2f}"] for c in doc["components"]]
    rows.append(["total", "", "", _ms(doc["total_seconds"]), "100%", "", "",
                 f"{doc['marginal_cost']:.2f}"])
    head = (f"{doc['model']} on {doc['gpu']}: batch {doc['batch']} x {doc['tokens']} tokens "
            f"at context {doc['context']:,}, per GPU per pass "
            f"({'achieved' if doc['achieved'] else 'peak'} rates)\n"
            f"MoE routing: {doc['routing']}\n\n")
    legend = ("\nr = d log C / d log tokens: 0 = an extra verified token is free, "
              "1 = it pays full price\n")
    mem = doc.get("memory")
    if mem:
        legend += (f"memory per GPU: weights {mem['weights_gb']:.1f} + KV cache "
                   f"{mem['kv_cache_gb']:.1f} + reserve {mem['reserve_gb']:.1f} = "
                   f"{mem['total_gb']:.1f} GB of {mem['capacity_gb']:.1f} GB"
                   f"{'' if mem['feasible'] else '  (DOES NOT FIT)'}; "
                   f"{doc['parameters_total'] / 1e9:.1f} B parameters, "
                   f"{doc['parameters_active'] / 1e9:.1f} B active per token\n")
    return head + grid(rows, ["component", "FLOPs", "bytes", "time", "share", "FLOP/B", "bound",
                              "r"], fmt) + legend


@table_for("Speedup")
def _speedup_table(doc: Document, fmt: str) -> str:
    keys = [k for k in doc if k not in ("apiVersion", "kind")]
    rows = [[k, doc[k]] for k in keys]
    return grid(rows, ["quantity", "value"], fmt)


@table_for("ProfileList")
def _profile_list_table(doc: Document, fmt: str) -> str:
    rows = [[p["kind"], p["name"], p["description"]] for p in doc["profiles"]]
    return grid(rows, ["kind", "name", "description"], fmt)


@table_for("StepCostSweep")
def _sweep_table(doc: Document, fmt: str) -> str:
    steps = doc["steps"]
    names: list[str] = []
    for st in steps:
        names += [c["name"] for c in st["components"] if c["name"] not in names]
    rows = []
    for st in steps:
        by = {c["name"]: c for c in st["components"]}
        row: list[Any] = [st["batch"], _ms(st["total_seconds"]), f"{st['marginal_cost']:.2f}"]
        for n in names:
            c = by.get(n)
            row.append(f"{c['share'] * 100:.0f}% r={c['marginal_cost']:.2f}" if c else "")
        rows.append(row)
    first = steps[0]
    head = (f"{first['model']} on {first['gpu']}: {first['tokens']} tokens per sequence at context "
            f"{first['context']:,}, per GPU per pass; each cell: share of the step, marginal cost r\n\n")
    return head + grid(rows, ["batch", "step", "r", *names], fmt)


@table_for("CheckReport")
def _check_table(doc: Document, fmt: str) -> str:
    """The `spectune check` verdict, per-point table and fix (markdown: a PR comment)."""
    cfg = doc["config"]
    md = fmt == "markdown"

    def gamma(g: int) -> str:
        return str(g) if g else "0 (off)"

    rows = []
    for p in doc["points"]:
        if not p.get("feasible", True):  # it cannot run: no speedups to show
            rows.append([p["batch"], f"{p['context']:,}", gamma(p["configured_gamma"]), "-", "-", "-",
                         "-", "no fit (memory)", "-"])
            continue
        mark = "ok" if p["ok"] else ("SLOWER" if p["slows_down"] else "FAIL")
        mark += f" {MARGINAL_MARK}" if p.get("marginal_gain") else ""
        rows.append([p["batch"], f"{p['context']:,}", gamma(p["configured_gamma"]),
                     f"{p['configured_speedup']:.2f}x", gamma(p["recommended_gamma"]),
                     f"{p['recommended_speedup']:.2f}x", f"{max(p['shortfall'], 0.0) * 100:.1f}%", mark,
                     f"{gamma(p['unconstrained_gamma'])} {p['unconstrained_speedup']:.2f}x"])
    headers = ["batch", "context", "configured γ", "speedup", "recommended γ", "speedup",
               "shortfall", "status", "γ* per point"]
    verdict = "PASS" if doc["verdict"] == "pass" else "FAIL"
    if cfg["speculate"]:
        sched = cfg["schedule"] if cfg["schedule_active"] else None
        what = (f"{cfg['method']}, " + (f"schedule {sched}" if sched
                                         else f"γ = {cfg['num_speculative_tokens']}"))
    else:
        what = "speculation off"
    if cfg.get("ep_exchange"):
        what += f"; expert-parallel exchange {cfg['ep_exchange']}"
    prof = doc["profile"]
    where = f"{cfg['file']}" + (f":{cfg['line']}" if cfg.get("line") else "")
    lines: list[str] = []
    if md:
        lines += [f"### spectune check: **{verdict}** — `{where}`", "",
                  f"{doc['summary']} (tolerance {doc['tolerance'] * 100:g}%).", "",
                  f"Configured ({cfg['engine']}, {cfg['format']}): {what}. Profile: "
                  f"`{prof['name']}` ({prof['model']}, drafter {prof['drafter']['name']} "
                  f"[{prof['drafter']['kind']}]).", ""]
    else:
        lines += [f"spectune check: {verdict}  {where}", doc["summary"],
                  f"configured ({cfg['engine']}, {cfg['format']}): {what}; profile {prof['name']}", ""]
    text = "\n".join(lines) + "\n" if lines else ""
    text += grid(rows, headers, fmt)
    tail: list[str] = (["", f"{MARGINAL_MARK} marginal gain: the recommended speedup's band reaches below "
                        "1.0×; only a slowdown fails such a point, and its gain is no certain win"]
                       if any(p.get("marginal_gain") for p in doc["points"]) else [])
    if doc["warnings"]:
        tail += ["", "**Warnings**" if md else "warnings:"]
        tail += [f"- {w}" for w in doc["warnings"]]
    fix = doc.get("fix")
    if fix:
        tail += ["", "**Fix** (the recommended settings):" if md else "fix (the recommended settings):"]
        lang = "yaml" if fix["format"].endswith("-config-file") else "shell"
        tail += ([f"```{lang}", fix["snippet"].rstrip("\n"), "```"] if md
                 else ["  " + ln for ln in fix["snippet"].rstrip("\n").splitlines()])
        if fix.get("adaptive_config"):
            tail += (["", "and the adaptive config file:", "```json",
                      fix["adaptive_config"].rstrip("\n"), "```"] if md
                     else ["  adaptive config:"] + ["  " + ln for ln in
                                                    fix["adaptive_config"].rstrip("\n").splitlines()])
    if doc["notes"]:
        tail += ["", "Notes:" if md else "notes:"] + [f"- {n}" for n in doc["notes"]]
    return text + ("\n".join(tail) + "\n" if tail else "")


@table_for("Calibration")
def _calibration_table(doc: Document, fmt: str) -> str:
    rows = []
    for c in doc["constants"]:
        unit = c["unit"]
        if c["identified"]:
            err = "n/a" if c["stderr"] is None else f"± {c['stderr']:.3g}"
            rows.append([c["name"], f"{c['value']:.4g} {unit}", err, f"{c['default']:.4g}"])
        else:
            rows.append([c["name"], f"{c['value']:.4g} {unit}", c.get("note", ""), f"{c['default']:.4g}"])
    out = [grid(rows, ["constant", "value", "standard error", "default"], fmt)]
    wrows = [[w["name"], "on" if w["speculative"] else "off", f"{w['batch']:.2f}", f"{w['width']:.3f}",
              f"{w['context']:.0f}", f"{w['measured_step_ms']:.3f}", f"{w['predicted_step_ms']:.3f}",
              f"{w['residual']:+.1%}"] for w in doc["windows"]]
    out.append(grid(wrows, ["window", "spec", "batch", "verify width", "context", "measured ms",
                            "predicted ms", "residual"], fmt))
    fit = doc["fit"]
    out.append(f"{fit['fitted']} constants fitted to {fit['windows']} windows; rms residual "
               f"{fit['rms_residual']:.1%}")
    d = doc.get("drafting")
    if d:
        out.append(f"drafting: {d['draft_fraction']:.1%} of sequence steps carried a draft, "
                   f"filled to {d['draft_fill']:.1%} of K"
                   + (f", each token followed by another with chance {d['draft_continuation']:.2f}"
                      if d.get("draft_continuation") is not None else "")
                   + f" ({d['source']})")
    return "\n".join(out) + "\n"
