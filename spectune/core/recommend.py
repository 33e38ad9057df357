"""Choosing gamma* at every operating point.

gamma* = argmax over 0..gamma_max of Sp(gamma), where 0 means "do not speculate". A
smaller gamma wins a near-tie: the recommendation is the smallest gamma whose speedup is
within ``tie_tolerance`` of the best (relative: Sp >= best / (1 + tie_tolerance)), because a
deeper draft that buys nothing measurable still costs memory, latency variance and drafter
load. The tables' legend says so (spectune.render.formats.tie_rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from spectune.core.band import speedup_bands
from spectune.core.cost import step_cost
from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment
from spectune.core.lengths import lengths_notes
from spectune.core.memory import Memory, memory, require_weights_fit, shared_prefix
from spectune.core.priors import assumed_note
from spectune.core.queueing import cap_note, capped
from spectune.core.speedup import SpeedupGrid, speedup_grid
from spectune.core.tree import verify_width


def choose(speedup: Array, tie_tolerance: float) -> NDArray[np.int64]:
    """Index of the smallest gamma within ``tie_tolerance`` of the best, over the last axis."""
    best = speedup.max(axis=-1, keepdims=True)
    good = speedup >= best / (1.0 + tie_tolerance)
    return np.argmax(good, axis=-1).astype(np.int64)


@dataclass(frozen=True)
class Recommendation:
    """gamma* and its predicted speedup per (batch, context), with the grid behind it and
    the component that costs most in the chosen verify step (``limiter``). ``memory`` is the
    per-GPU memory over (batch, context); a point where it exceeds the GPU is not
    ``feasible`` and has no recommendation (its gamma* and speedup are not to be shown)."""

    deployment: Deployment
    grid: SpeedupGrid
    gamma_star: NDArray[np.int64]  # (nb, ns)
    speedup_star: Array  # (nb, ns)
    limiter: NDArray[np.str_]  # (nb, ns)
    notes: tuple[str, ...]
    memory: Memory
    speedup_low: Array  # (nb, ns): the band of speedup_star (spectune.core.band)
    speedup_high: Array

    @property
    def feasible(self) -> NDArray[np.bool_]:
        return np.broadcast_to(self.memory.feasible, self.gamma_star.shape)


def recommend(dep: Deployment) -> Recommendation:
    """gamma* per operating point; InputError (exit 2) when the weights alone do not fit."""
    require_weights_fit(dep.model, dep.drafter, dep.gpu, dep.parallelism)
    free = speedup_grid(dep)
    grid = capped(dep, free)  # an engine that runs fewer requests while it speculates queues the rest
    sp = grid.speedup
    idx = choose(sp, dep.tie_tolerance)
    gamma_star = grid.gamma[idx]
    best = np.take_along_axis(sp, idx[..., None], axis=-1)[..., 0]
    lo, hi = (np.take_along_axis(a, idx[..., None], axis=-1)[..., 0] for a in speedup_bands(dep, grid))
    limiter = _limiters(dep, grid, gamma_star)
    acc = dep.acceptance
    notes = [n for n in (assumed_note(acc), acc.extrapolation_note(int(grid.gamma.max()))) if n]
    notes += lengths_notes(dep.workload)
    queue = cap_note(dep, free, gamma_star, free.gamma[choose(free.speedup, dep.tie_tolerance)]) \
        if grid is not free else None
    if queue:
        notes.append(queue)
    if dep.model.is_moe and not dep.model.routing.uniform and (gamma_star > 0).any():
        # the verify's expert reads rest on it: say which routing priced them, and its source
        notes.append(f"MoE routing: {dep.model.routing.describe()} (a verify's positions of one sequence "
                     "share experts, so it reads fewer than as many unrelated tokens; `routing: uniform` "
                     "in the profile prices them as independent)")
    if dep.engine.provisional:  # unmeasured engine constants: the numbers claim no more than that
        notes.append(f"engine {dep.engine.name}: provisional constants ({dep.engine.provisional}); "
                     "the predicted speedups are not validated beyond that")
    # The engine sizes per-draft-position state (linear attention) by its largest gamma.
    mem = memory(dep.model, dep.drafter, dep.gpu, dep.parallelism,
                 grid.batch[:, None].astype(float), grid.context[None, :].astype(float),
                 int(gamma_star.max()), dep.engine.max_num_batched_tokens,
                 shared_prefix=shared_prefix(dep))
    if dep.workload.shared_prefix_tokens:
        notes.append(f"memory: a shared prompt prefix of {shared_prefix(dep):,} tokens is held once in "
                     f"the KV cache (prefix caching; workload.shared_prefix_tokens "
                     f"{dep.workload.shared_prefix_tokens:,} in whole blocks of the engine's kv_block_size)")
    n_out = int((~np.broadcast_to(mem.feasible, gamma_star.shape)).sum())
    if n_out:
        notes.append(f"{n_out} of {gamma_star.size} operating points do not fit in "
                     f"{dep.gpu.name} memory (KV cache); they get no recommendation")
    return Recommendation(dep, grid, gamma_star, best, limiter, tuple(notes), mem, lo, hi)


def _limiters(dep: Deployment, grid: SpeedupGrid, gamma_star: NDArray[np.int64]) -> NDArray[np.str_]:
    """Name of the costliest component of the verify step at gamma* (one vectorised pass)."""
    B = grid.batch[:, None].astype(float)
    S = grid.context[None, :].astype(float)
    T = verify_width(dep.drafter, gamma_star)
    cost = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, B, T, S,
                     speculative=gamma_star > 0)
    names = list(cost.components)
    stack = np.stack([np.broadcast_to(c.seconds, T.shape) for c in cost.components.values()])
    at = (np.arange(len(grid.batch))[:, None], np.arange(len(grid.context))[None, :], gamma_star)
    stack = np.concatenate([stack, grid.draft[at][None]])
    names.append("drafter")
    if grid.prefill is not None:  # an aggregated step's prefill share competes too
        stack = np.concatenate([stack, grid.prefill[at][None]])
        names.append("prefill")
    return np.asarray(names)[np.argmax(stack, axis=0)]
