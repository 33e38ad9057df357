"""Engine-neutral choice of the draft length(s) to configure from a recommendation.

A recommendation holds gamma* per (batch, context). A serving engine takes at most one
draft length per batch-size range (vLLM's ``num_speculative_tokens_per_batch_size``,
SGLang's adaptive config) or one for everything, so this module collapses the grid:

* per batch size: gamma* where it is the same at every declared context, otherwise the
  gamma that maximises the mean predicted speedup over the declared contexts among those
  that slow no declared context down (gamma = 0 always qualifies);
* as inclusive batch-size ranges covering 1..max declared batch, split at the geometric
  midpoint between declared sizes, equal neighbours merged;
* one static gamma for the whole declared mix: the one that maximises the mean predicted
  throughput (tokens/s) over the operating points, weighted by an observed batch
  distribution when one is given, among those that slow no operating point of the mix down.

A configured gamma that slows a declared operating point fails ``spectune check``, so the
plan never picks one: what is emitted always passes the gate.

Ties follow :func:`spectune.recommend.choose`: the smallest gamma within the deployment's
``tie_tolerance`` of the best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spectune.cost.roofline import Array
from spectune.errors import InputError
from spectune.recommend import Recommendation, choose
from spectune.speedup import SpeedupGrid, speedup_grid

Range = tuple[int, int, int]  # (first batch size, last batch size, gamma), inclusive
SLOWDOWN = 1e-9  # a speedup below 1 - SLOWDOWN slows the point down (as `spectune check` judges)


def _safe(speedup: Array) -> Array:
    """Mask over the last (gamma) axis: True where no point of ``speedup`` is slowed down."""
    flat = np.asarray(speedup).reshape(-1, np.shape(speedup)[-1])
    return np.asarray((flat >= 1.0 - SLOWDOWN).all(axis=0))


@dataclass(frozen=True)
class Plan:
    """What to configure: gamma per declared batch size, as ranges, and one static gamma."""

    per_batch: tuple[tuple[int, int], ...]  # (batch size, gamma), ascending batch
    schedule: tuple[Range, ...]  # merged inclusive ranges from batch 1 to the largest batch
    static_gamma: int  # best single gamma for the declared (or observed) batch mix
    weights: tuple[tuple[int, float], ...]  # batch mix behind static_gamma (sums to 1)

    @property
    def max_gamma(self) -> int:
        return max(g for _, g in self.per_batch)

    @property
    def varies(self) -> bool:
        """True when the best gamma changes with batch size."""
        return len({g for _, g in self.per_batch}) > 1


def per_batch_gamma(rec: Recommendation) -> list[tuple[int, int]]:
    """One gamma per declared batch size (see the module docstring)."""
    grid = rec.grid
    tol = rec.deployment.tie_tolerance
    out = []
    for i, b in enumerate(grid.batch):
        # Contexts whose KV cache does not fit have no recommendation: plan over the rest
        # (all of them when none fits, so every declared batch size still gets a gamma).
        fits = rec.feasible[i] if rec.feasible[i].any() else np.ones_like(rec.feasible[i])
        row = rec.gamma_star[i][fits]
        if np.all(row == row[0]):
            g = int(row[0])
        else:
            sp = grid.speedup[i][fits]  # (feasible contexts, gammas)
            g = int(grid.gamma[choose(np.where(_safe(sp), sp.mean(axis=0), -np.inf), tol)])
        out.append((int(b), g))
    return sorted(out)


def schedule_ranges(per_batch: Sequence[tuple[int, int]]) -> list[Range]:
    """Inclusive ranges ``[lo, hi, gamma]`` covering 1..max batch with no gap or overlap.

    The boundary between declared sizes b_i < b_{i+1} is floor(sqrt(b_i * b_{i+1})): a batch
    size between two operating points takes the gamma of the one nearer on a log scale.
    """
    pts = sorted(per_batch)
    ranges: list[list[int]] = []
    lo = 1
    for k, (b, g) in enumerate(pts):
        if k + 1 < len(pts):
            nxt = pts[k + 1][0]
            hi = max(b, min(nxt - 1, math.isqrt(b * nxt)))
        else:
            hi = b
        if ranges and ranges[-1][2] == g:
            ranges[-1][1] = hi
        else:
            ranges.append([lo, hi, g])
        lo = hi + 1
    return [(r[0], r[1], r[2]) for r in ranges]


def lookup(schedule: Sequence[Range], batch: int, cap: int | None = None) -> int:
    """gamma at ``batch`` as vLLM reads a schedule: a gap takes the previous range's gamma,
    batches past the last range take the last gamma, all clamped to ``cap``
    (``build_dynamic_sd_schedule_lookup`` in vllm/v1/spec_decode/dynamic/utils.py)."""
    if not schedule:
        raise ValueError("empty schedule")
    k = None
    for lo, hi, g in sorted(schedule):
        if batch < lo:
            break
        k = g
        if batch <= hi:
            break
    if k is None:  # batch below the first range: vLLM requires the first range to start at 1
        k = sorted(schedule)[0][2]
    return min(k, cap) if cap is not None else k


def normalise_weights(weights: Mapping[int, float] | None,
                      batches: Sequence[int]) -> dict[int, float]:
    """Batch-mix weights summing to 1: uniform over ``batches`` when none are given."""
    if not weights:
        return {int(b): 1.0 / len(batches) for b in batches}
    clean = {int(b): float(w) for b, w in weights.items() if w > 0}
    total = sum(clean.values())
    if not clean or not math.isfinite(total) or total <= 0:
        raise InputError("the batch-size distribution has no positive weight")
    return {b: w / total for b, w in sorted(clean.items())}


def throughput(grid: SpeedupGrid) -> np.ndarray:
    """Predicted decode throughput, tokens per second, per (batch, context, gamma)."""
    return (grid.batch[:, None, None] * grid.expected_tokens[None, None, :]
            / (grid.verify + grid.draft))


def static_gamma(rec: Recommendation,
                 weights: Mapping[int, float] | None = None) -> tuple[int, dict[int, float]]:
    """The single gamma that maximises mean predicted throughput over the batch mix
    (uniform over contexts) and the normalised mix it was chosen for."""
    grid = rec.grid
    mix = normalise_weights(weights, [int(b) for b in grid.batch])
    if set(mix) - {int(b) for b in grid.batch}:
        grid = speedup_grid(rec.deployment, batch=sorted(mix), gamma_max=int(rec.grid.gamma.max()))
    index = {int(b): i for i, b in enumerate(grid.batch)}
    tp = throughput(grid).mean(axis=1)  # (nb, ng): mean over contexts
    w = np.zeros(len(grid.batch))
    for b, x in mix.items():
        w[index[b]] = x
    mean = (w[:, None] * tp).sum(axis=0)
    mean = np.where(_safe(grid.speedup[w > 0]), mean, -np.inf)
    return int(grid.gamma[choose(mean, rec.deployment.tie_tolerance)]), mix


def describe(plan: Plan) -> str:
    """The schedule in words, for notes: ``batch 1-45: 5, batch 46-90: 4``."""
    return ", ".join(f"batch {lo}-{hi}: {g}" if lo != hi else f"batch {lo}: {g}"
                     for lo, hi, g in plan.schedule)


def make_plan(rec: Recommendation, weights: Mapping[int, float] | None = None) -> Plan:
    per = per_batch_gamma(rec)
    static, mix = static_gamma(rec, weights)
    return Plan(tuple(per), tuple(schedule_ranges(per)), static, tuple(sorted(mix.items())))
