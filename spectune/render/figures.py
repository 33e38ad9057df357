"""The report's figures as inline SVG text, drawn with matplotlib (the optional extra
``pip install 'spectune[report]'``).

Each function takes plain document data (what ``recommend -o json`` and ``cost -o json``
print) and returns one ``<svg>`` element: fonts drawn as paths, no metadata, no external
reference, so the HTML report stays one self-contained file. matplotlib is imported
inside :func:`_pyplot` only, keeping every other command's start-up fast.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError

INSTALL_HINT = "pip install 'spectune[report]'"  # from an installed wheel (PyPI)


def install_hint(package_dir: Path | None = None) -> str:
    """How to install the ``report`` extra where spectune runs from: in a checkout (the
    package beside the repository's pyproject.toml, e.g. an editable install) the extra of
    that checkout, else the wheel's :data:`INSTALL_HINT`."""
    here = package_dir or Path(__file__).resolve().parents[1]  # spectune/, above render/
    project = here.parent / "pyproject.toml"
    try:
        ours = project.is_file() and 'name = "spectune"' in project.read_text(encoding="utf-8")
    except OSError:
        ours = False
    if ours:
        return f"pip install -e '.[report]' (in {here.parent})"
    return INSTALL_HINT
# Colour-blind-safe qualitative palette (Okabe & Ito, "Color Universal Design", 2008).
# then Paul Tol's "muted" scheme for parts past eight (https://personal.sron.nl/~pault/).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999",
           "#882255", "#117733", "#332288", "#AA4499", "#44AA99", "#DDCC77")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InputError(f"the report's figures need matplotlib: {install_hint()}") from None
    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "spectune",
                                "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False})
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any) -> str:
    """The figure as one ``<svg>`` element (no XML prolog, DOCTYPE or metadata)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight",
                metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def speedup_curves(points: Sequence[dict[str, Any]], gammas: Sequence[int],
                   batches: Sequence[int], contexts: Sequence[int]) -> str:
    """Sp(gamma) against gamma, one panel per context, one line per batch size; the chosen
    gamma* of each line is a filled dot, Sp = 1 (plain decode) a dashed line."""
    plt = _pyplot()
    by = {(p["batch"], p["context"]): p for p in points}
    fig, axes = plt.subplots(1, len(contexts), figsize=(3.4 * len(contexts), 2.9), sharey=True,
                             squeeze=False)
    for ax, s in zip(axes[0], contexts, strict=True):
        ax.axhline(1.0, color="#888888", lw=0.8, ls="--")
        for k, b in enumerate(batches):
            p = by.get((b, s))
            if p is None or not p.get("speedups"):
                continue
            colour = PALETTE[k % len(PALETTE)]
            ax.plot(gammas, p["speedups"], color=colour, lw=1.4, marker=".", label=f"batch {b}")
            if p.get("gamma") is not None:
                ax.plot([p["gamma"]], [p["speedups"][p["gamma"]]], "o", color=colour, ms=7)
        ax.set_title(f"context {s:,} tokens")
        ax.set_xlabel("draft length γ")
        ax.set_xticks(list(gammas))
    axes[0][0].set_ylabel("throughput speedup Sp(γ), ×")
    axes[0][-1].legend(frameon=False, fontsize=8, loc="best")
    return _svg(fig)


def cost_ledger(steps: Sequence[dict[str, Any]]) -> str:
    """One stacked bar per batch size: the speculative step (verify pass at gamma + 1 tokens
    by component, plus the drafter) in units of the plain decode step C0; a diamond marks
    m(gamma), the tokens one step yields. Speculation pays where the diamond is above the bar
    (speedup = diamond / bar). ``steps`` come from :func:`spectune.render.report.ledger_steps`."""
    plt = _pyplot()
    names: list[str] = []
    for st in steps:
        names += [c["name"] for c in st["components"] if c["name"] not in names]
    names.append("drafter")
    fig, ax = plt.subplots(figsize=(6.6, 3.1))
    labels = [f"B={st['batch']}\nγ={st['gamma']}" for st in steps]
    bottom = [0.0] * len(steps)
    for k, name in enumerate(names):
        heights = []
        for st in steps:
            sec = (st["draft_seconds"] if name == "drafter" else
                   next((c["seconds"] for c in st["components"] if c["name"] == name), 0.0))
            heights.append(sec / st["plain_seconds"])
        ax.bar(labels, heights, bottom=bottom, color=PALETTE[k % len(PALETTE)], label=name, width=0.6,
               hatch="//" if name == "drafter" else None, edgecolor="white", linewidth=0.3)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.plot(labels, [st["expected_tokens"] for st in steps], "D", color="black", ms=7,
            label="m(γ): tokens per step")
    ax.axhline(1.0, color="#888888", lw=0.8, ls="--")
    ax.set_ylabel("step cost, × plain decode step C₀")
    ax.legend(frameon=False, fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    return _svg(fig)


def acceptance_bars(conditional: Sequence[float], given: int, gamma_max: int,
                    origin: str = "stated") -> str:
    """Conditional acceptance a_i per draft position: the ``given`` positions solid,
    labelled by ``origin`` (measured, stated or assumed), the extrapolated ones (holding the
    last given rate) hatched."""
    plt = _pyplot()
    n = max(gamma_max, len(conditional))
    rates = [conditional[min(i, len(conditional) - 1)] for i in range(n)]
    fig, ax = plt.subplots(figsize=(4.6, 2.6))
    pos = list(range(1, n + 1))
    ax.bar(pos[:given], rates[:given], color=PALETTE[0], label=origin)
    if n > given:
        ax.bar(pos[given:], rates[given:], color="white", edgecolor=PALETTE[0], hatch="///",
               label="extrapolated")
    ax.set_xticks(pos)
    ax.set_xlabel("draft position i")
    ax.set_ylabel("a_i (accepted | previous accepted)")
    ax.set_ylim(0, 1.22)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.legend(frameon=False, fontsize=8, loc="upper right", ncol=2)
    return _svg(fig)
