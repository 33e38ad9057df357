"""How the speedup falls as prompts grow (issue 21, item 6): gamma* and the best speedup of an
aggregated worker at a few batch sizes over prompt/output ratios (ISL/OSL), beside decode only
(spectune.core.cost.prefill prices the prefill each step carries). The HTML report shows it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from spectune.core.deployment import Deployment, LengthClass
from spectune.core.lengths import mean_lengths
from spectune.core.recommend import choose
from spectune.core.speedup import speedup_grid

#: Prompt/output ratios shown: chat (< 1) to RAG and agents (4-64).
RATIOS = (0.25, 1.0, 4.0, 16.0, 64.0)
#: Output tokens per request when the workload gives none (a chat-length answer).
DEFAULT_OUTPUT_TOKENS = 256.0


@dataclass(frozen=True)
class PromptGrowth:
    """Best speedup and its gamma per batch (rows) and ratio (columns; column 0: decode only)."""

    batches: tuple[int, ...]
    ratios: tuple[float, ...]
    output_tokens: float
    context: int
    speedup: np.ndarray  # (nb, 1 + nr)
    gamma: np.ndarray  # (nb, 1 + nr)


def prompt_growth(dep: Deployment, context: int, batches: Sequence[int],
                  ratios: Sequence[float] = RATIOS) -> PromptGrowth:
    """gamma* and the best speedup at ``context`` for each batch, decode only and at each
    ISL/OSL ratio (OSL: the workload's mean output length, else :data:`DEFAULT_OUTPUT_TOKENS`)."""
    osl = mean_lengths(dep.workload.lengths)[1] if dep.workload.lengths else DEFAULT_OUTPUT_TOKENS
    w = replace(dep.workload, batch_sizes=tuple(batches), context_lengths=(context,), disaggregated=False)
    cols = [replace(dep, workload=replace(w, lengths=()))]
    cols += [replace(dep, workload=replace(w, lengths=(LengthClass(r * osl, osl),))) for r in ratios]
    grids = [speedup_grid(d).speedup[:, 0, :] for d in cols]  # each (nb, ng)
    picks = [choose(g, dep.tie_tolerance) for g in grids]  # gamma* as recommend picks it
    sp = np.stack([np.take_along_axis(g, i[:, None], axis=-1)[:, 0]
                   for g, i in zip(grids, picks, strict=True)], axis=1)
    gam = np.stack(picks, axis=1)
    return PromptGrowth(tuple(batches), tuple(ratios), osl, context, sp, gam)


def prompt_growth_html(pg: PromptGrowth) -> str:
    """The table, with a sentence saying what it shows."""
    head = "".join(f"<th>{r:g}</th>" for r in pg.ratios)
    rows = []
    for i, b in enumerate(pg.batches):
        cells = "".join(f"<td>{int(pg.gamma[i, j])} · {pg.speedup[i, j]:.2f}×</td>"
                        for j in range(pg.speedup.shape[1]))
        rows.append(f"<tr><th>{b}</th>{cells}</tr>")
    note = (f'<p class="note">An aggregated worker also runs prefill: at concurrency B each step carries '
            f"the prompt tokens that arrive per step, m(γ)·B·ISL/OSL, which speculation does not speed up "
            f"(docs/aggregated.md). Each cell: γ* · best speedup at context {pg.context:,}, outputs of "
            f"{pg.output_tokens:,.0f} tokens, by prompt/output ratio ISL/OSL; the first column is a "
            "decode-only worker.</p>")
    return (note + '<table class="ledger"><thead><tr><th>batch</th><th>decode only</th>' + head
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
