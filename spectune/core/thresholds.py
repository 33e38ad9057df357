"""Where a deployment's recommendation stops holding: the numbers ``spectune rules`` writes
into Prometheus alerts, computed from a :class:`~spectune.core.deployment.Deployment` by the cost
model alone (no files, no terminal).

At one context length S (the profile's first unless given), for each of the profile's batch
sizes b, with gamma* and its speedup Sp* from :func:`spectune.core.recommend.recommend`:

* **break-even acceptance**: the i.i.d. per-token acceptance alpha at which gamma*'s
  predicted speedup at b falls to 1.0. The costs of a step do not depend on acceptance, so
  Sp(alpha) = m(gamma*, alpha) * C0 / (C_verify + C_draft) with the costs of
  :func:`spectune.core.speedup.speedup_grid` and m from :func:`spectune.core.speedup.verify_yield`;
  alpha is found by bisection (m rises with alpha), all batch sizes at once;
* **warning acceptance**: where the gain Sp - 1 falls below ``tolerance`` x Sp* (none where
  the gain at the profile's own acceptance is already below it);
* **draft lengths within tolerance**: every K in 1..MAX_GAMMA whose Sp(K) at b is at least
  (1 - tolerance) x Sp* (at the profile's acceptance);
* whether plain decode (K = 0) leaves more than ``tolerance`` of Sp* on the table.

An observed batch is assigned to the profile's batch size nearest in log scale: band
boundaries are the geometric means of neighbouring batch sizes; below 0.5 running requests
the deployment is idle and no band applies.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from spectune.base.limits import MAX_GAMMA
from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Deployment
from spectune.core.recommend import recommend
from spectune.core.speedup import speedup_grid, steps_with_draft, verified
from spectune.core.tree import branching
from spectune.core.tree import expected_tokens as tree_expected_tokens

IDLE_BELOW = 0.5  # running requests per instance: below this the deployment is idle
_BISECTIONS = 50  # halvings of [0, 1]: alpha to 1e-15, far below any metric's resolution


@dataclass(frozen=True)
class Band:
    """One profile batch size and the observed batches (running requests per instance,
    ``low`` inclusive to ``high`` exclusive, None: no bound) it stands for. Acceptance
    thresholds are i.i.d. per-token alphas and the per-depth rate a draft tree makes of them
    (``*_rate``, equal to alpha for a chain); None where there is none (gamma* 0, the point
    does not fit in memory, or speculation pays even at zero acceptance)."""

    batch: int
    low: float
    high: float | None
    feasible: bool
    gamma_star: int
    speedup_star: float
    breakeven_alpha: float | None
    breakeven_rate: float | None
    warning_alpha: float | None
    warning_rate: float | None
    ok_gammas: tuple[int, ...]  # draft lengths >= 1 within tolerance of Sp* here
    plain_loses: bool  # plain decode leaves more than tolerance of Sp* on the table

    def mean_length(self, rate: float | None, k: int | None = None) -> float | None:
        """Mean acceptance length per draft of ``k`` tokens (gamma* by default) at per-depth
        acceptance ``rate``: 1 + rate + ... + rate^k."""
        if rate is None:
            return None
        depth = self.gamma_star if k is None else k
        return float(sum(rate ** d for d in range(depth + 1)))


@dataclass(frozen=True)
class Thresholds:
    """The bands of one deployment at ``context`` tokens, with what they were computed from."""

    deployment: Deployment
    context: int
    tolerance: float
    bands: tuple[Band, ...]

    @property
    def source(self) -> str:
        """One line saying where the numbers come from."""
        dep = self.deployment
        return (f"spectune's cost model: profile {dep.name} ({dep.model.name} on {dep.gpu.name}, "
                f"drafter {dep.drafter.name}, engine {dep.engine.name}), context {self.context} tokens, "
                f"acceptance {dep.acceptance.source}, tolerance {self.tolerance:g}")


def bands_of(batches: tuple[int, ...]) -> list[tuple[float, float | None]]:
    """(low, high) of each batch size's band: boundaries at geometric means of neighbours."""
    edges = [math.sqrt(a * b) for a, b in itertools.pairwise(batches)]
    lows = [IDLE_BELOW, *edges]
    highs: list[float | None] = [*edges, None]
    return list(zip(lows, highs, strict=True))


def thresholds(dep: Deployment, *, tolerance: float, context: int | None = None) -> Thresholds:
    """The alert thresholds of ``dep`` (module docstring); ``context`` defaults to the
    profile's first context length."""
    s = dep.workload.context_lengths[0] if context is None else context
    batches = tuple(sorted(set(dep.workload.batch_sizes)))
    one = replace(dep, workload=replace(dep.workload, batch_sizes=batches, context_lengths=(s,)))
    rec = recommend(one)
    gstar = rec.gamma_star[:, 0]
    sstar = rec.speedup_star[:, 0]
    feasible = rec.feasible[:, 0]
    # every draft length up to the largest spectune evaluates, for the served one
    grid = speedup_grid(one, gamma_max=max(MAX_GAMMA, dep.gamma_max))
    sp = grid.speedup[:, 0, :]  # (nb, ng)
    rows = np.arange(len(batches))
    costs = _Costs(one, np.asarray(batches, dtype=float), float(s), gstar, grid.c0[:, 0],
                   grid.verify[rows, 0, gstar], grid.draft[rows, 0, gstar])
    pays = (gstar > 0) & feasible
    breakeven = _solve_alpha(costs, np.ones(len(batches)), pays)
    # no warning where the gain at the profile's own acceptance is already within tolerance
    warning = _solve_alpha(costs, 1.0 + tolerance * sstar, pays & (sstar - 1.0 > tolerance * sstar))
    out = []
    for i, (b, (low, high)) in enumerate(zip(batches, bands_of(batches), strict=True)):
        g = int(gstar[i])
        ok = tuple(int(k) for k in range(1, sp.shape[1]) if sp[i, k] >= (1.0 - tolerance) * sstar[i])
        b_a, w_a = breakeven[i], warning[i]
        out.append(Band(int(b), low, high, bool(feasible[i]), g, float(sstar[i]), b_a,
                        _rate(one, g, b_a), w_a, _rate(one, g, w_a), ok if g else (),
                        bool(g > 0 and (1.0 - tolerance) * sstar[i] > 1.0)))
    return Thresholds(dep, s, tolerance, tuple(out))


@dataclass(frozen=True)
class _Costs:
    """Per profile batch size (arrays of n): the batch, gamma*, and the costs of a step at the
    profile's acceptance (seconds per GPU): plain decode C0, the verify and the draft of gamma*."""

    dep: Deployment
    batch: np.ndarray
    context: float
    gamma: np.ndarray
    c0: np.ndarray
    verify: np.ndarray
    draft: np.ndarray

    def speedup(self, alpha: np.ndarray) -> np.ndarray:
        """Sp(gamma*) at i.i.d. ``alpha`` per batch size. C0 and C_draft do not depend on
        acceptance; on a decode-only step C_verify does not either, so Sp = m C0 / (C_verify +
        C_draft). On an aggregated step the prefill it carries grows with m, and with observed
        n-gram shares the verify width too: C_verify is priced again at alpha, all batch sizes
        at once (:func:`spectune.core.speedup.verified`)."""
        dep = self.dep
        m_drafted = np.array([float(tree_expected_tokens(Acceptance.iid(float(a)), dep.drafter, int(g)))
                              for a, g in zip(alpha, self.gamma, strict=True)])
        if dep.workload.aggregated:
            m, verify, _ = verified(dep, self.batch, self.context, self.gamma.astype(float), m_drafted)
        else:
            m = 1.0 + steps_with_draft(dep, m_drafted) * (m_drafted - 1.0)
            verify = self.verify
        return m * self.c0 / (verify + self.draft)


def _solve_alpha(costs: _Costs, target: np.ndarray, where: np.ndarray) -> list[float | None]:
    """Per batch size, the i.i.d. alpha at which Sp(gamma*) reaches ``target`` (bisection
    over all of them at once: Sp rises with alpha); None where ``where`` is False, where even
    alpha = 0 reaches it, or alpha = 1 does not."""
    n = len(target)
    lo, hi = np.zeros(n), np.ones(n)
    solvable = where & (costs.speedup(lo) < target) & (costs.speedup(hi) >= target)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        below = costs.speedup(mid) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return [float(h) if ok else None for h, ok in zip(hi, solvable, strict=True)]


def _rate(dep: Deployment, gamma: int, alpha: float | None) -> float | None:
    """Per-depth acceptance of the draft at ``alpha``: alpha for a chain, 1 - (1 - alpha)^b
    for a tree of b candidates per depth (:mod:`spectune.core.tree`)."""
    if alpha is None:
        return None
    b = float(branching(dep.drafter, max(gamma, 1)))
    return 1.0 - (1.0 - alpha) ** b
