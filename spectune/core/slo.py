"""Goodput under a latency SLO: the best (batch, gamma) whose predicted time per output
token meets a target, per context length.

A step of B sequences verifying gamma drafts takes t = C_verify(B, gamma + 1, S) +
C_draft(B, gamma, S) seconds and commits m(gamma) tokens per sequence, so

    TPOT(B, gamma, S) = t / m(gamma),    throughput per GPU = B m(gamma) / (t * GPUs).

Among the (B, gamma) with TPOT <= SLO, the one of highest throughput per GPU is the
goodput point; the best with gamma = 0 (batching alone) beside it makes the value of
speculation at the SLO one ratio. Batches are searched densely over 1..max(batch_sizes).
The target is in seconds; ``--tpot-slo`` text is read by
:func:`spectune.documents.durations.tpot_seconds` (a bare number: milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment
from spectune.core.memory import memory, shared_prefix
from spectune.core.speedup import speedup_grid

#: Batch sizes searched between 1 and the profile's largest (log-spaced, plus the profile's).
SEARCH_POINTS = 64


@dataclass(frozen=True)
class Operating:
    """One (batch, gamma) choice: output tokens per second per GPU and TPOT in seconds."""

    batch: int
    gamma: int
    tokens_per_second_per_gpu: float
    tpot: float


@dataclass(frozen=True)
class SloPoint:
    context: int
    best: Operating | None  # None: nothing meets the SLO
    batch_only: Operating | None

    @property
    def speculation_gain(self) -> float | None:
        """Throughput of the best point over the best without speculation."""
        if self.best is None or self.batch_only is None:
            return None
        return self.best.tokens_per_second_per_gpu / self.batch_only.tokens_per_second_per_gpu


@dataclass(frozen=True)
class Goodput:
    tpot_slo: float
    batches: NDArray[np.int64]
    points: tuple[SloPoint, ...]


def search_batches(batch_sizes: tuple[int, ...]) -> NDArray[np.int64]:
    top = max(batch_sizes)
    dense = np.round(np.geomspace(1, top, SEARCH_POINTS)).astype(np.int64)
    return np.unique(np.concatenate((dense, np.asarray(batch_sizes, dtype=np.int64))))


def _pick(thr: Array, tpot: Array, ok: NDArray[np.bool_], batches: NDArray[np.int64],
          gammas: NDArray[np.int64]) -> Operating | None:
    """The highest-throughput allowed cell of (nb, ng) arrays."""
    if not ok.any():
        return None
    i, g = np.unravel_index(int(np.argmax(np.where(ok, thr, -np.inf))), thr.shape)
    return Operating(int(batches[i]), int(gammas[g]), float(thr[i, g]), float(tpot[i, g]))


def goodput(dep: Deployment, tpot_slo: float) -> Goodput:
    """Per context length of ``dep``, the goodput point under ``tpot_slo`` seconds and the
    best with speculation off."""
    batches = search_batches(dep.workload.batch_sizes)
    workload = replace(dep.workload, batch_sizes=tuple(int(b) for b in batches))
    grid = speedup_grid(replace(dep, workload=workload))
    step = grid.verify + grid.draft  # (nb, ns, ng)
    m = grid.expected_tokens[None, None, :]
    tpot = step / m
    thr = grid.batch[:, None, None] * m / (step * dep.parallelism.gpus)
    # only (batch, context) points whose weights + KV cache fit in GPU memory can be served
    # (the drafter's KV slots at each gamma included)
    fits = memory(dep.model, dep.drafter, dep.gpu, dep.parallelism, grid.batch[:, None, None],
                  grid.context[None, :, None], grid.gamma[None, None, :],
                  dep.engine.max_num_batched_tokens, shared_prefix=shared_prefix(dep)).feasible
    ok = (tpot <= tpot_slo) & np.broadcast_to(fits, tpot.shape)
    points = []
    for j, s in enumerate(grid.context):
        best = _pick(thr[:, j], tpot[:, j], ok[:, j], grid.batch, grid.gamma)
        plain = _pick(thr[:, j, :1], tpot[:, j, :1], ok[:, j, :1], grid.batch, grid.gamma[:1])
        points.append(SloPoint(int(s), best, plain))
    return Goodput(tpot_slo, grid.batch, tuple(points))
