"""Every output format of every command: the versioned envelope, YAML, JSON, tables.

Commands build a plain ``dict`` document (``envelope(kind, body)``); :func:`render` turns
it into text. Human tables are drawn by a per-kind function registered in ``_TABLES``;
YAML and JSON are the document itself, keys in insertion order (the schema order), so
identical input gives byte-identical output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

API_VERSION = "spectune/v1"
FORMATS = ("table", "yaml", "json", "markdown")

Document = dict[str, Any]
TableFn = Callable[[Document, str], str]
_TABLES: dict[str, TableFn] = {}


def envelope(kind: str, body: dict[str, Any]) -> Document:
    """The versioned document every machine-readable output is wrapped in."""
    return {"apiVersion": API_VERSION, "kind": kind, **body}


def table_for(kind: str) -> Callable[[TableFn], TableFn]:
    """Register the human table/markdown renderer of one document kind."""

    def register(fn: TableFn) -> TableFn:
        _TABLES[kind] = fn
        return fn

    return register


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


def render(doc: Document, fmt: str) -> str:
    """Text of ``doc`` in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return to_json(doc)
    if fmt == "yaml":
        return to_yaml(doc)
    if fmt in ("table", "markdown"):
        fn = _TABLES.get(str(doc.get("kind")))
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


@table_for("Recommendation")
def _recommendation_table(doc: Document, fmt: str) -> str:
    dep = doc["deployment"]
    acc = doc["acceptance"]
    points = {(p["batch"], p["context"]): p for p in doc["points"]}
    rows = []
    for b in doc["batch_sizes"]:
        row: list[Any] = [b]
        for s in doc["context_lengths"]:
            p = points[(b, s)]
            row.append(f"{p['gamma']}  {p['speedup']:.2f}x" if p["speculate"] else "0  off")
        rows.append(row)
    headers = ["batch \\ context"] + [f"{s:,}" for s in doc["context_lengths"]]
    par = dep["parallelism"]
    title = (f"{dep['model']['name']} on {dep['gpu']['name']} (tp={par['tp']} ep={par['ep']} "
             f"dp={par['dp']}), drafter {dep['drafter']['name']} [{dep['drafter']['kind']}], "
             f"{dep['engine']['name']}")
    rates = ", ".join(f"{r:.2f}" for r in acc["conditional"])
    lines = [title, f"acceptance: {acc['source']} (a = {rates})", ""]
    if fmt == "markdown":
        lines = [f"**{title}**", "", f"acceptance: {acc['source']} (a = {rates})", "", ""]
    legend = ("cell: gamma* and predicted throughput speedup over plain decode; "
              "'0  off' = speculation does not pay there")
    return "\n".join(lines) + grid(rows, headers, fmt) + "\n" + legend + "\n"


@table_for("StepCost")
def _cost_table(doc: Document, fmt: str) -> str:
    rows = [[c["name"], _si(c["flops"], "FLOP"), _si(c["bytes"], "B"), _ms(c["seconds"]),
             f"{c['share'] * 100:.1f}%", f"{c['intensity']:.1f}", c["bound"],
             f"{c['marginal_cost']:.2f}"] for c in doc["components"]]
    rows.append(["total", "", "", _ms(doc["total_seconds"]), "100%", "", "",
                 f"{doc['marginal_cost']:.2f}"])
    head = (f"{doc['model']} on {doc['gpu']}: batch {doc['batch']} x {doc['tokens']} tokens "
            f"at context {doc['context']:,}, per GPU per pass "
            f"({'achieved' if doc['achieved'] else 'peak'} rates)\n\n")
    legend = ("\nr = d log C / d log tokens: 0 = an extra verified token is free, "
              "1 = it pays full price (seed 000)\n")
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
        mark = "ok" if p["ok"] else ("SLOWER" if p["slows_down"] else "FAIL")
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
    tail: list[str] = []
    if doc["warnings"]:
        tail += ["", "**Warnings**" if md else "warnings:"]
        tail += [f"- {w}" for w in doc["warnings"]]
    fix = doc.get("fix")
    if fix:
        tail += ["", "**Fix** (the recommended settings):" if md else "fix (the recommended settings):"]
        lang = "yaml" if fix["format"] == "vllm-config-file" else "shell"
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
                   f"filled to {d['draft_fill']:.1%} of K ({d['source']})")
    return "\n".join(out) + "\n"
