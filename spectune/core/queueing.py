"""An engine that runs at most R requests at once while it speculates (``Engine.spec_max_running``:
SGLang's 48 without ``--max-running-requests``), at a concurrency B above R.

Setting: a saturated closed loop of B clients, each with one request always outstanding
(the operating point "batch B" of a profile), requests alike. Plain decode runs all B. The
speculating server runs R and keeps B - R waiting in its queue; every step it advances R
sequences by m(gamma) tokens at the cost C(R) = C_verify(R) + C_draft(R) (the grid's costs at
batch R, the prefill share an aggregated step carries included). All B sequences advance
by m tokens in B / R such steps, so the speculative arm's cost per step of the whole batch is

    C_cap(B) = C(R) * B / R,

and the speedup at B is

    Sp_cap(B) = m C0(B) / C_cap(B) = Sp(R) * [R / C0(R)] / [B / C0(B)]:

the capped server's throughput (its throughput at R) over plain decode's at B. By Little's
law (B = X L) a client's time per request grows by the same factor B / R
(:func:`queued`), which is how :func:`spectune.documents.validation.capped_latency` prices
the same queue on end-to-end latency. Assumptions: steady state, saturated (at least B
requests always want to run; an arrival-limited load below R never queues), admission from
the queue costs nothing and nothing is preempted, the KV cache of the R running fits
(the memory check keeps the plain arm's B), gamma = 0 is the plain arm (never capped).
Arrays are NumPy throughout; nothing here knows an engine, a file or a terminal.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment
from spectune.core.speedup import SpeedupGrid, speedup_grid


def queued(batch: ArrayLike, running: int) -> Array:
    """B / min(B, R): steps of R running sequences that advance all B by one step (and, by
    Little's law, how much longer each of B clients waits per request); 1 where B <= R or
    ``running`` is 0 (no cap)."""
    b = np.asarray(batch, dtype=float)
    if running <= 0:
        return np.ones_like(b)
    return b / np.minimum(b, float(running))


def capped(dep: Deployment, grid: SpeedupGrid) -> SpeedupGrid:
    """``grid`` with the speculative arm (gamma > 0) of every batch above
    ``dep.engine.spec_max_running`` priced at that many running and the rest queued:
    C_verify, C_draft and the prefill share become their values at R times B / R (module
    docstring); ``grid`` itself when there is no cap or no batch above it."""
    cap = dep.engine.spec_max_running
    over = grid.batch > cap
    if cap <= 0 or not over.any():
        return grid
    at = speedup_grid(dep, batch=[cap], context=grid.context, gamma_max=int(grid.gamma.max()))
    scale = queued(grid.batch, cap)[:, None, None]
    spec = over[:, None, None] & (grid.gamma > 0)[None, None, :]

    def swap(mine: Array, theirs: Array) -> Array:
        return np.where(spec, theirs * scale, mine)

    prefill = None
    if grid.prefill is not None and at.prefill is not None:
        prefill = swap(grid.prefill, at.prefill)
    return replace(grid, verify=swap(grid.verify, at.verify), draft=swap(grid.draft, at.draft),
                   prefill=prefill)


def cap_note(dep: Deployment, uncapped: SpeedupGrid, gamma_star: NDArray[np.int64],
             free_star: NDArray[np.int64]) -> str | None:
    """What the cap does to the recommendation (None: no batch above it): the batches priced
    queued, and where gamma* differs from what it would be without the cap (``free_star``,
    gamma* on ``uncapped``)."""
    cap = dep.engine.spec_max_running
    over = uncapped.batch > cap
    if cap <= 0 or not over.any():
        return None
    batches = ", ".join(str(int(b)) for b in uncapped.batch[over])
    text = (f"engine {dep.engine.name} runs at most {cap} requests at once while it speculates "
            f"(spec_max_running_requests): at batch {batches} the speculative arm is priced with {cap} "
            f"running and the rest queued (its throughput at {cap} against plain decode's at the batch)")
    moved = np.argwhere(over[:, None] & (gamma_star != free_star))
    if len(moved):
        i, j = (int(x) for x in moved[-1])
        g = int(free_star[i, j])
        text += (f"; the cap changes gamma* at {len(moved)} point(s), e.g. batch {int(uncapped.batch[i])}, "
                 f"context {int(uncapped.context[j]):,}: {int(gamma_star[i, j])} instead of {g} "
                 f"({float(uncapped.speedup[i, j, g]):.2f}x uncapped)")
    return (text + "; a server that runs them all (e.g. launched with --max-running-requests at least the "
            "largest batch) is priced with spec_max_running_requests: 0 in the engine profile")
