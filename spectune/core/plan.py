"""Engine-neutral choice of the draft length(s) to configure from a recommendation.

A recommendation holds gamma* per (batch, context). A serving engine takes at most one
draft length per batch-size range (vLLM's ``num_speculative_tokens_per_batch_size``,
SGLang's adaptive config) or one for everything, so this module collapses the grid:

* per batch size: gamma* where it is the same at every declared context, otherwise the
  gamma that maximises the mean predicted speedup over the declared contexts among those
  that slow no declared context down (gamma = 0 always qualifies);
* smoothed so the schedule does not flap: a gamma that rises and falls back (or falls and
  rises back) across neighbouring batch sizes is replaced by its neighbours' wherever that
  stays within ``SCHEDULE_MARGIN`` (relative mean predicted speedup) of each batch size's
  best and slows none of its contexts down (:func:`smooth`);
* as inclusive batch-size ranges covering 1..max declared batch, split at the geometric
  midpoint between declared sizes, equal neighbours merged;
* one static gamma for the whole declared mix: the one that maximises the mean predicted
  throughput (tokens/s) over the operating points, weighted by an observed batch
  distribution when one is given, among those that slow no operating point of the mix down.

A configured gamma that slows a declared operating point fails ``spectune check``, so the
plan never picks one: what is emitted always passes the gate.

Ties follow :func:`spectune.core.recommend.choose`: the smallest gamma within the deployment's
``tie_tolerance`` of the best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from spectune.base.errors import InputError
from spectune.core.cost.roofline import Array
from spectune.core.recommend import Recommendation, choose
from spectune.core.speedup import SpeedupGrid, speedup_grid

Range = tuple[int, int, int]  # (first batch size, last batch size, gamma), inclusive
SLOWDOWN = 1e-9  # a speedup below 1 - SLOWDOWN slows the point down (as `spectune check` judges)
# A change of gamma between neighbouring batch sizes is scheduled only when it gains more
# than this (relative mean predicted speedup). Well inside the cost model's error against
# published speedups (docs/validation.md: about +-20%), so a smaller gain is noise, and an
# operator should not see the schedule flap on it.
SCHEDULE_MARGIN = 0.05


def _safe(speedup: Array) -> Array:
    """Mask over the last (gamma) axis: True where no point of ``speedup`` is slowed down."""
    flat = np.asarray(speedup).reshape(-1, np.shape(speedup)[-1])
    return np.asarray((flat >= 1.0 - SLOWDOWN).all(axis=0))


@dataclass(frozen=True)
class Plan:
    """What to configure: gamma per declared batch size, as ranges, and one static gamma."""

    per_batch: tuple[tuple[int, int], ...]  # (batch size, gamma) as configured, ascending batch
    schedule: tuple[Range, ...]  # merged inclusive ranges from batch 1 to the largest batch
    static_gamma: int  # best single gamma for the declared (or observed) batch mix
    weights: tuple[tuple[int, float], ...]  # batch mix behind static_gamma (sums to 1)
    best_per_batch: tuple[tuple[int, int], ...] = ()  # before smoothing (= per_batch if unchanged)
    margin: float = SCHEDULE_MARGIN
    mix_given: bool = False  # weights came from an observation or --batch-mix

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


def _mean_and_safe(rec: Recommendation,
                   batches: Sequence[int]) -> tuple[Array, NDArray[np.bool_]]:
    """Mean predicted speedup over the declared contexts and the no-slowdown mask, per
    (batch in ``batches`` order, gamma)."""
    grid = rec.grid
    index = {int(b): i for i, b in enumerate(grid.batch)}
    rows = [index[b] for b in batches]
    sp = grid.speedup[rows]  # (nb, ns, ng)
    # Only the contexts that fit in memory count (all of a batch size's when none fits), as in
    # per_batch_gamma.
    fits = np.asarray(rec.feasible, dtype=bool)[rows]
    fits = np.where(fits.any(axis=1, keepdims=True), fits, True)[:, :, None]
    safe = np.asarray(((sp >= 1.0 - SLOWDOWN) | ~fits).all(axis=1), dtype=bool)
    mean = (sp * fits).sum(axis=1) / fits.sum(axis=1)
    return np.asarray(mean, dtype=float), safe


def runs(values: Sequence[int]) -> list[tuple[int, int, int]]:
    """Runs of equal values: (first index, last index, value)."""
    out: list[list[int]] = []
    for k, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1][1] = k
        else:
            out.append([k, k, v])
    return [(r[0], r[1], r[2]) for r in out]


def smooth(rec: Recommendation, per_batch: Sequence[tuple[int, int]],
           margin: float = SCHEDULE_MARGIN) -> list[tuple[int, int]]:
    """``per_batch`` without flaps: a run of batch sizes whose gamma is a local peak or valley
    (1 -> 0 -> 1) takes a neighbour's gamma, or the edge run beside it takes the run's,
    wherever the new gamma stays within ``margin`` of each batch size's best mean speedup
    and slows none of its contexts down. The cheapest such fix (relative speedup given up)
    is applied first, until none is left. A monotone schedule (5 -> 4 -> 3) is a trend, not a
    flap, and is kept."""
    pts = sorted(per_batch)
    if margin <= 0:  # no margin: nothing is given up, the schedule stays as it is
        return pts
    batches = [b for b, _ in pts]
    gam = [g for _, g in pts]
    mean, safe = _mean_and_safe(rec, batches)
    best = np.array([mean[k, g] for k, g in enumerate(gam)])
    allowed = safe & (mean >= best[:, None] * (1.0 - margin))

    while True:
        rs = runs(gam)
        fixes: list[tuple[float, int, int, int]] = []  # (loss, first, last, new gamma)
        for i in range(1, len(rs) - 1):
            (_, _, gl), (lo, hi, g), (_, _, gr) = rs[i - 1], rs[i], rs[i + 1]
            if (g - gl) * (g - gr) <= 0:
                continue  # not a peak or valley
            options = [(lo, hi, gl), (lo, hi, gr)]
            if i - 1 == 0:
                options.append((rs[0][0], rs[0][1], g))
            if i + 1 == len(rs) - 1:
                options.append((rs[-1][0], rs[-1][1], g))
            for a, z, new in options:
                ks = range(a, z + 1)
                if all(allowed[k, new] for k in ks):
                    loss = sum(1.0 - mean[k, new] / best[k] for k in ks)
                    fixes.append((loss, a, z, new))
        if not fixes:
            return list(zip(batches, gam, strict=True))
        _, a, z, new = min(fixes)
        gam[a:z + 1] = [new] * (z - a + 1)


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


def make_plan(rec: Recommendation, weights: Mapping[int, float] | None = None,
              margin: float = SCHEDULE_MARGIN) -> Plan:
    best = per_batch_gamma(rec)
    per = smooth(rec, best, margin)
    static, mix = static_gamma(rec, weights)
    return Plan(tuple(per), tuple(schedule_ranges(per)), static, tuple(sorted(mix.items())),
                tuple(best), margin, bool(weights))


def describe_pairs(per_batch: Sequence[tuple[int, int]]) -> str:
    """Per-batch gammas in words, runs merged: ``batch 1: 1, batch 2-4: 0, batch 8: 1``."""
    pts = sorted(per_batch)
    spans = [(pts[a][0], pts[z][0], g) for a, z, g in runs([g for _, g in pts])]
    return ", ".join(f"batch {lo}-{hi}: {g}" if lo != hi else f"batch {lo}: {g}" for lo, hi, g in spans)


def smoothing_note(plan: Plan) -> str | None:
    """Says what smoothing changed, and at which threshold (None when nothing changed)."""
    if not plan.best_per_batch or tuple(plan.best_per_batch) == tuple(plan.per_batch):
        return None
    return (f"schedule smoothed: a gamma that goes up and back down (or down and back up) across "
            f"batch sizes is kept only where it gains more than {plan.margin * 100:g}% predicted "
            f"speedup (less is within the cost model's error); best gamma per batch size before "
            f"smoothing: "
            f"{describe_pairs(plan.best_per_batch)}")


def describe_mix(plan: Plan) -> str:
    """The batch mix behind the static gamma, in words."""
    parts = ", ".join(f"batch {b}: {w * 100:.0f}%" for b, w in plan.weights)
    how = ("the batch mix observed or given with --batch-mix" if plan.mix_given
           else "the profile's batch sizes, weighted equally")
    return f"{how} ({parts}; each averaged over the declared contexts)"


def off_reason(rec: Recommendation, plan: Plan, static: bool) -> str:
    """Why no gamma >= 1 is configured: the batch sizes where every gamma >= 1 slows some
    declared context down (for one static gamma they veto speculation for the whole mix),
    and how the mix was weighted."""
    batches = [b for b, _ in plan.weights] if static else [int(b) for b in rec.grid.batch]
    grid = rec.grid
    if set(batches) - {int(b) for b in grid.batch}:
        grid = speedup_grid(rec.deployment, batch=sorted(batches), gamma_max=int(rec.grid.gamma.max()))
    index = {int(b): i for i, b in enumerate(grid.batch)}
    vetoes = []
    for b in sorted(batches):
        sp = grid.speedup[index[b]][:, 1:]  # (contexts, gamma 1..)
        if not (sp >= 1.0 - SLOWDOWN).all(axis=0).any():
            # the point where the least harmful gamma still slows down most
            g = int(np.argmax(sp.min(axis=0)))
            j = int(np.argmin(sp[:, g]))
            vetoes.append(f"batch {b} ({sp[j, g]:.2f}x with gamma {g + 1} at context "
                          f"{int(grid.context[j]):,})")
    mix = f"; batch mix: {describe_mix(plan)}" if static else ""
    if vetoes and static:
        return ("every gamma >= 1 slows decode down somewhere at " + ", ".join(vetoes)
                + ", and one static gamma must not slow any operating point of the mix" + mix)
    if vetoes:
        return "every gamma >= 1 slows decode down somewhere at " + ", ".join(vetoes)
    return ("no gamma >= 1 raises the predicted throughput by more than the tie tolerance "
            f"({rec.deployment.tie_tolerance * 100:g}%)" + mix)


def static_notes(rec: Recommendation, plan: Plan, why: str, setting: str, off: str) -> list[str]:
    """The notes of an engine that cannot follow ``plan``'s per-batch gamma (``why``) and is
    given one static ``setting`` = ``plan.static_gamma`` instead (its name in the engine's
    terms, e.g. "K", "max_draft_len"); when that gamma is 0, ``off`` says what the emitted
    form leaves out, and :func:`off_reason` why."""
    k = plan.static_gamma
    notes = [f"gamma* changes with batch size ({describe(plan)}) but {why}: emitting one static "
             f"{setting} = {k}, the best mean predicted throughput over {describe_mix(plan)}"]
    if k == 0:
        notes.append(f"that static {setting} is 0, so {off}: " + off_reason(rec, plan, True))
    return notes
