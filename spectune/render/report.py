"""``spectune report``: one self-contained HTML page that shows why gamma* moves.

Sections: a gamma* heatmap over batch x context (an HTML table coloured by speedup; each
cell carries ``data-batch``, ``data-context``, ``data-gamma``, ``data-speedup``), Sp(gamma)
curves at a few batch sizes, the verify step's per-component cost and marginal cost r at a
few batch sizes (the ledger behind gamma*), acceptance per draft position (stated or
measured against extrapolated), and every input with its source.

The page is built from the same documents ``recommend -o json`` and ``cost -o json``
print, so the numbers agree by construction. No script, stylesheet, font or image is
fetched when the page is viewed: CSS is inline and figures are inline SVG
(:mod:`spectune.render.figures`, matplotlib, the ``report`` extra).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spectune.base.errors import SpectuneError
from spectune.base.version import __version__
from spectune.core.recommend import Recommendation
from spectune.core.uncertainty import band_words
from spectune.documents.envelope import Document, envelope
from spectune.render.formats import MARGINAL_LEGEND, MARGINAL_MARK, feasible, speedup_words, tie_rule

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
.sub{color:#555;margin-top:0}table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f4f4f4}
td.txt,th.txt{text-align:left}
table.heatmap td{min-width:7.5em;text-align:center;font-variant-numeric:tabular-nums}
table.heatmap td .g{font-weight:700;font-size:1.1em}table.heatmap td .band{font-size:.8em;opacity:.85}
td.off{background:#e9e9e9;color:#555}
td.infeasible{background:repeating-linear-gradient(45deg,#fafafa,#fafafa 5px,#e4d7d7 5px,#e4d7d7 10px)}
.legend{font-size:.88em;color:#444}.note{font-size:.9em;color:#444}
details pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.82em}
pre.deploy{background:#f7f7f7;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em}
svg{max-width:100%;height:auto}
table.ledger{font-size:.82em}table.ledger td{white-space:nowrap}
"""

LOW, HIGH = (247, 251, 255), (8, 81, 156)  # ColorBrewer "Blues" ends, light to dark


def _colour(speedup: float, top: float) -> tuple[str, str]:
    """Background and text colour of a heatmap cell: white at Sp = 1, dark blue at ``top``."""
    t = 0.0 if top <= 1.0 else min(max((speedup - 1.0) / (top - 1.0), 0.0), 1.0)
    rgb = tuple(round(lo + t * (hi - lo)) for lo, hi in zip(LOW, HIGH, strict=True))
    return "#" + "".join(f"{c:02x}" for c in rgb), "#fff" if t > 0.55 else "#111"


def band_text(p: dict[str, Any]) -> str:
    """``(2.30–2.80)`` when the point carries its prediction band, else empty."""
    lo, hi = p.get("speedup_low"), p.get("speedup_high")
    if lo is None or hi is None:
        return ""
    return f"({lo:.2f}–{hi:.2f})" + (f" {MARGINAL_MARK}" if p.get("marginal_gain") else "")


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def heatmap(doc: Document) -> str:
    """The gamma* table over batch (rows) x context (columns), coloured by speedup."""
    pts = {(p["batch"], p["context"]): p for p in doc["points"]}
    top = max((p["speedup"] for p in doc["points"] if feasible(p)), default=1.0)
    head = "".join(f"<th>{s:,}</th>" for s in doc["context_lengths"])
    rows = [f'<tr><th class="txt">batch \\ context</th>{head}</tr>']
    for b in doc["batch_sizes"]:
        cells = [f"<th>{b}</th>"]
        for s in doc["context_lengths"]:
            p = pts[(b, s)]
            attrs = f'data-batch="{b}" data-context="{s}"'
            if not feasible(p):
                why = _e(p.get("reason") or "not feasible")
                cells.append(f'<td class="infeasible" {attrs} data-gamma="" data-speedup="" '
                             f'title="{why}">—<br><span class="band">{why}</span></td>')
                continue
            attrs += f' data-gamma="{p["gamma"]}" data-speedup="{p["speedup"]}"'
            band = band_text(p)
            if band:
                attrs += f' data-speedup-low="{p["speedup_low"]}" data-speedup-high="{p["speedup_high"]}"'
            if not p["gamma"]:
                cells.append(f'<td class="off" {attrs} title="speculation does not pay here">'
                             f'<span class="g">off</span><br>γ = 0</td>')
                continue
            bg, fg = _colour(p["speedup"], top)
            tip = f"limited by {p.get('limiter', '?')}"
            cells.append(f'<td class="spec" {attrs} style="background:{bg};color:{fg}" title="{_e(tip)}">'
                         f'<span class="g">γ* = {p["gamma"]}</span><br>{p["speedup"]:.2f}×'
                         + (f' <span class="band">{band}</span>' if band else "") + "</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return '<table class="heatmap" id="heatmap">' + "".join(rows) + "</table>"


def pick(values: Sequence[int], n: int) -> list[int]:
    """Up to ``n`` values spread evenly over ``values`` (first and last always included)."""
    if len(values) <= n:
        return list(values)
    idx = sorted({round(k * (len(values) - 1) / (n - 1)) for k in range(n)})
    return [values[i] for i in idx]


def ledger_steps(rec: Recommendation, doc: Document, context: int, batches: Sequence[int]) -> list[Document]:
    """The speculative step against plain decode at ``context`` for each of ``batches``.

    Each entry is the ``StepCost`` document of the verify pass at gamma + 1 tokens (what
    ``spectune cost --tokens gamma+1`` prints), where gamma is gamma* there, or 1 where
    gamma* = 0 (what one drafted token would cost); plus ``gamma``, ``plain_seconds`` per
    component and in total (C0, the same pass at 1 token), ``draft_seconds`` (C_draft),
    ``expected_tokens`` m(gamma) and ``speedup`` = m C0 / (C_verify + C_draft)."""
    from spectune.core.cost import marginal_cost, step_cost
    from spectune.documents.results import STEP_LEDGER, sig, step_ledger

    dep = rec.deployment
    grid = rec.grid
    pts = {(p["batch"], p["context"]): p for p in doc["points"]}
    row = {int(b): i for i, b in enumerate(grid.batch)}
    j = [int(s) for s in grid.context].index(context)
    out = []
    for b in batches:
        p = pts[(b, context)]
        if not feasible(p):
            continue
        g = max(int(p["gamma"]), 1)
        args = (dep.model, dep.gpu, dep.parallelism, dep.engine, b, g + 1, context)
        inputs = {"gpu": dep.gpu.name, "model": dep.model.name, "batch": b, "tokens": g + 1,
                  "context": context}
        step = envelope("StepCost", {**inputs, **STEP_LEDGER.dump(step_ledger(step_cost(*args),
                                                                          marginal_cost(*args)))})
        plain = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, b, 1, context)
        for c in step["components"]:
            comp = plain.components.get(c["name"])
            c["plain_seconds"] = sig(comp.seconds) if comp is not None else 0.0
        i = row[b]
        step.update({"gamma": g, "gamma_star": int(p["gamma"]),
                     "plain_seconds": sig(grid.c0[i, j]), "draft_seconds": sig(grid.draft[i, j, g]),
                     "expected_tokens": sig(grid.expected_tokens[g]),
                     "speedup": sig(grid.speedup[i, j, g])})
        out.append(step)
    return out


def _ledger_table(steps: Sequence[Document]) -> str:
    names: list[str] = []
    for st in steps:
        names += [c["name"] for c in st["components"] if c["name"] not in names]
    head = "".join(f"<th>batch {st['batch']}, γ = {st['gamma']}"
                   + ("" if st["gamma_star"] else " (γ* = 0)") + "</th>" for st in steps)
    rows = [f'<tr><th class="txt">component</th>{head}</tr>']
    for n in names:
        cells = []
        for st in steps:
            c = next((c for c in st["components"] if c["name"] == n), None)
            cells.append("<td></td>" if c is None else
                         f"<td>{c['seconds'] * 1e3:.3f} ms (+{(c['seconds'] - c['plain_seconds']) * 1e3:.3f})"
                         f" · r {c['marginal_cost']:.2f}</td>")
        rows.append(f'<tr><td class="txt">{_e(n)}</td>{"".join(cells)}</tr>')
    rows.append('<tr><td class="txt">drafter (γ passes)</td>' + "".join(
        f"<td>{st['draft_seconds'] * 1e3:.3f} ms (+{st['draft_seconds'] * 1e3:.3f})</td>" for st in steps)
        + "</tr>")
    total = [st["total_seconds"] + st["draft_seconds"] for st in steps]
    rows.append('<tr><td class="txt"><b>speculative step</b> vs plain decode</td>' + "".join(
        f"<td><b>{t * 1e3:.3f} ms = {t / st['plain_seconds']:.2f}× plain</b></td>"
        for t, st in zip(total, steps, strict=True)) + "</tr>")
    rows.append('<tr><td class="txt">tokens per step m(γ) → speedup</td>' + "".join(
        f"<td><b>{st['expected_tokens']:.2f} → {st['speedup']:.2f}×</b></td>" for st in steps) + "</tr>")
    return '<table class="ledger">' + "".join(rows) + "</table>"


def extra_costs(st: Document) -> list[tuple[str, float]]:
    """What speculating adds to one step over plain decode, seconds per part (the drafter and
    each component's growth from 1 to gamma + 1 tokens), largest first."""
    parts = [(c["name"], c["seconds"] - c["plain_seconds"]) for c in st["components"]]
    parts.append(("drafter", st["draft_seconds"]))
    return sorted(parts, key=lambda x: -x[1])


def why_sentence(steps: Sequence[Document]) -> str:
    """Per ledger batch: what the speculative step costs relative to plain decode, what it
    yields, and the two parts of the step that add most."""
    items = []
    for st in steps:
        cost = (st["total_seconds"] + st["draft_seconds"]) / st["plain_seconds"]
        top = [f"{_e(n)} +{x * 1e3:.2f} ms" for n, x in extra_costs(st)[:2] if x > 0]
        items.append(f"<li>batch {st['batch']}, γ = {st['gamma']}: the step costs {cost:.2f}× a "
                     f"plain step and yields {st['expected_tokens']:.2f} tokens, so "
                     f"<b>{st['speedup']:.2f}×</b>"
                     + (f"; most of the extra: {', '.join(top)}" if top else "")
                     + ("" if st["gamma_star"] else
                        " — no gain worth speculating for (within the tie tolerance of plain "
                        "decode, or slower), so γ* = 0") + ".</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _acceptance_table(acc: dict[str, Any]) -> str:
    m = acc["expected_tokens"]
    head = "".join(f"<th>{g}</th>" for g in range(len(m)))
    cells = "".join(f"<td>{x:.3f}</td>" for x in m)
    return (f'<table><tr><th class="txt">γ</th>{head}</tr>'
            f'<tr><td class="txt">m(γ): tokens per verify</td>{cells}</tr></table>')


def _inputs(doc: Document, sources: Sequence[tuple[str, str]]) -> str:
    dep = doc["deployment"]
    par = dep["parallelism"]
    rows = [
        ("deployment", dep["name"]),
        ("GPU", f"{dep['gpu']['name']} ({dep['gpu']['key']}); achieved fraction of peak: bandwidth "
                f"{dep['gpu']['bandwidth_fraction']}, FLOP/s {dep['gpu']['flops_fraction']}"),
        ("model", f"{dep['model']['name']}: {dep['model']['params'] / 1e9:.1f} B parameters; weights "
                  f"{dep['model']['weights']}, experts {dep['model']['experts']}, KV cache "
                  f"{dep['model']['kv_cache']}"),
        ("drafter", f"{dep['drafter']['name']} [{dep['drafter']['kind']}]"
                    + (f", {dep['drafter']['path']}" if dep["drafter"]["path"] else "")),
        ("parallelism", f"tp={par['tp']} ep={par['ep']} dp={par['dp']}"),
        ("engine", dep["engine"]["name"] + (f" {dep['engine']['version']}" if dep["engine"]["version"]
                                            else "")),
        ("acceptance", doc["acceptance"]["source"]),
        ("γ considered", f"0..{dep['gamma_max']}; a smaller γ wins within "
                         f"{dep['tie_tolerance'] * 100:g}% of the best"),
    ]
    table = "<table>" + "".join(f'<tr><th class="txt">{_e(k)}</th><td class="txt">{_e(v)}</td></tr>'
                                for k, v in rows) + "</table>"
    details = "".join(f"<details><summary>{_e(title)}</summary><pre>{_e(text)}</pre></details>"
                      for title, text in sources)
    return table + details


@dataclass(frozen=True)
class Deploy:
    """What to deploy, for the engine the profile prices: the emit kind, the command line
    (None when the engine cannot run the recommendation as described) and the notes."""

    engine: str
    kind: str
    command: str | None
    notes: Sequence[str]


def deploy_settings(rec: Recommendation, weights: Mapping[int, float] | None = None) -> Deploy:
    """The report's deploy section: the launch line of the engine the profile prices (its
    ``family``: SGLang flags, vLLM's ``--speculative-config``; the default engine's for the pure
    roofline); an engine that cannot run the drafter says why."""
    from spectune.engines.emit import build_snippet
    from spectune.engines.registry import engine_pricing

    engine = engine_pricing(rec.deployment.engine)
    kind = next(iter(engine.SNIPPET_KINDS))  # each engine's first snippet is its launch-line form
    try:
        snip = build_snippet(rec, kind, weights)
    except SpectuneError as err:
        return Deploy(engine.LABEL, kind, None, [str(err)])
    return Deploy(engine.LABEL, kind, engine.launch_command(snip.text), snip.notes)


def report_html(rec: Recommendation, doc: Document, sources: Sequence[tuple[str, str]] = (),
                notes: Sequence[str] = (), deploy: Deploy | None = None) -> str:
    """The whole page. ``doc`` is ``recommendation_doc(rec)`` (possibly carrying bands or
    infeasible points); ``sources`` are (title, text) of the built-in profiles used;
    ``deploy`` the engine settings of :func:`deploy_settings`."""
    import spectune.render.figures as figures
    from spectune.core.prompt_table import prompt_growth, prompt_growth_html

    dep = doc["deployment"]
    batches, contexts = doc["batch_sizes"], doc["context_lengths"]
    context = contexts[len(contexts) // 2]
    curve_batches = pick(batches, 5)
    steps = ledger_steps(rec, doc, context, pick(batches, 4))
    acc = doc["acceptance"]
    given = len(acc["conditional"]) if len(acc["conditional"]) > 1 else dep["gamma_max"]
    par = dep["parallelism"]
    title = f"{dep['model']['name']} on {dep['gpu']['name']} with {dep['drafter']['name']}"
    has_band = any(band_text(p) for p in doc["points"])
    has_infeasible = any(not feasible(p) for p in doc["points"])
    legend = (f"Each cell: γ*, the best draft length there, and the predicted {speedup_words(doc)} (×)"
              + (f"; in brackets the prediction's band, {band_words(doc)}" if has_band else "")
              + f". {tie_rule(dep['tie_tolerance'])}"
              + (f". {MARGINAL_LEGEND}" if any(p.get("marginal_gain") for p in doc["points"]) else "")
              + ". Darker = larger speedup. <b>off</b>: speculation does not pay (γ = 0)"
              + ("; hatched —: the point cannot run (reason in the cell)" if has_infeasible else "")
              + ". Hover a cell for the component that costs most there.")
    all_notes = [*notes, *doc.get("notes", [])]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>spectune report: {_e(dep['name'])}</title><style>{CSS}</style></head><body>",
        f"<h1>Speculative decoding: {_e(title)}</h1>",
        f'<p class="sub">{_e(dep["name"])} · tp={par["tp"]} ep={par["ep"]} dp={par["dp"]} · '
        f'engine {_e(dep["engine"]["name"])} · spectune {__version__}</p>',
        "<h2>1. Best draft length γ* by batch size and context length</h2>",
        heatmap(doc), f'<p class="legend">{legend}</p>',
        "<h2>2. Speedup against draft length</h2>",
        '<p class="note">Sp(γ) = m(γ) · C₀ / (C_verify(γ+1) + C_draft(γ)): tokens gained per verify '
        "against the extra cost of verifying and drafting them. The dot on each line is γ*; below "
        "the dashed line speculation slows decode down.</p>",
        figures.speedup_curves(doc["points"], doc["gammas"], curve_batches, pick(contexts, 3)),
        "<h3>How the speedup falls as prompts grow</h3>", prompt_growth_html(prompt_growth(
            rec.deployment, context, pick(batches, 4))),
        f"<h2>3. Why γ* moves: the speculative step against plain decode at context {context:,}</h2>",
        '<p class="note">Speculating with γ drafts turns one plain decode step (cost C₀) into a '
        "verify pass over γ+1 tokens plus γ drafter passes; it pays when the tokens gained per step, "
        "m(γ), outgrow that cost. Each cell: the part's time per GPU in the speculative step, in "
        "brackets what it adds over plain decode, and its marginal cost r = d log C / d log tokens: "
        "r near 0 means one more verified token is almost free (weights read once serve every "
        "token), so longer drafts pay; r near 1 means each drafted token pays full price (the step "
        "is compute-bound, or a mixture-of-experts layer touches new experts per token), so γ* "
        "falls. Where γ* = 0 the column shows what γ = 1 would cost.</p>",
        why_sentence(steps),
        figures.cost_ledger(steps) if steps else "", _ledger_table(steps) if steps else "",
        "<h2>4. Acceptance per draft position</h2>",
        f'<p class="note">Source: {_e(acc["source"])}.'
        + (f" {_e(acc['extrapolation'])}." if acc.get("extrapolation") else "") + "</p>",
        figures.acceptance_bars(acc["conditional"], given, dep["gamma_max"],
                                rec.deployment.acceptance.origin),
        _acceptance_table(acc),
        "<h2>5. Inputs and their sources</h2>", _inputs(doc, sources),
    ]
    if deploy is not None:
        parts += [f"<h2>6. What to deploy ({_e(deploy.engine)})</h2>"]
        if deploy.command is None:
            parts += ['<p class="note">No settings: ' + "; ".join(_e(n) for n in deploy.notes) + "</p>"]
        else:
            parts += [f'<p class="note">The settings {_e(deploy.engine)} can take for this recommendation, '
                      f"as <code>spectune recommend PROFILE --emit {_e(deploy.kind)}</code> prints them "
                      "(the notes explain them):</p>",
                      f'<pre class="deploy">{_e(deploy.command)}</pre>',
                      "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in deploy.notes) + "</ul>"]
    if all_notes:
        parts += ["<h2>Notes</h2><ul>"] + [f"<li>{_e(n)}</li>" for n in all_notes] + ["</ul>"]
    parts += ["</body></html>"]
    return "\n".join(parts) + "\n"
