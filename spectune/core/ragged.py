"""Confidence-gated and ragged draft depths (seed 003, "The second story: where should we
spend our depth").

A batch is B draft rounds, one per sequence. Round i has the drafter's per-depth
confidences a_1^i..a_K^i (conditional: P(draft d accepted | drafts < d were)) and a
realised number of accepted drafts. Its expected committed tokens at depth g are

    m_i(g) = 1 + sum_{d<=g} v_{i,d},   v_{i,d} = prod_{k<=d} a_k^i,

and one step costs C(B, g) = C_verify(B, 1 + sum_i g_i / B, S) + C_draft(B, mean g, S).
Under this cost model the step cost of a ragged batch depends on its depths only through
their sum D = sum_i g_i (attention reads each sequence's cache once and prices queries per
token; distinct experts depend on the sum, :mod:`spectune.core.cost.routing`); the drafter is
priced at the mean depth (interpolated), i.e. ragged verify *and* draft.

Four policies, each as throughput over plain decode (B / C(B, 0)):

* homogeneous: one gamma for every step and sequence, the best in hindsight;
* gated: each step one batch-wide gamma chosen from the live confidences;
* ragged: the gated depth trimmed per sequence, lowest-confidence drafts first (the seed's
  greedy trim; since C depends on the depths only through D, the best trim is the best
  count D of the confidence-ranked drafts up to the gated depth);
* ragged_free: per-sequence depths without the gated cap, the D drafts of highest v first:
  the exact optimum of sum_i m_i(g_i) / C(B, g) that the seed calls too hard to solve in
  general (it is easy here because C depends on g only through D);
* oracle: ragged with perfect calibration, v = 1 for the drafts that will be accepted and 0
  beyond (the policy drafts only tokens it knows will be accepted).

Long-run throughput is sum(tokens) / sum(seconds) over steps, which a per-step choice
maximises by maximising tokens - lambda * seconds at lambda = that throughput (Dinkelbach
1967); lambda starts at the homogeneous throughput and is iterated, so in expectation
oracle >= ragged_free >= ragged >= gated >= homogeneous.

Heterogeneity comes from a file of recorded rounds, or from a two-population mixture of
'sweep' and 'miss' rounds (weight w of rounds accept each draft with a_sweep, the rest with
a_miss) fitted to the per-position acceptance: pooled marginal P_d = w a_sweep^d +
(1 - w) a_miss^d. The mixture's drafter is calibrated by construction (its confidence is its
type's rate), so the first three policies are evaluated at their expected tokens there.
vLLM and SGLang verify one draft depth per batch today: the ragged and oracle columns are
headroom for an engine that runs ragged depths efficiently, not something to configure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from spectune.core.acceptance import Acceptance
from spectune.core.cost import draft_cost, step_cost
from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment

POLICIES = ("homogeneous", "gated", "ragged", "ragged_free", "oracle")
#: Draft rounds simulated per operating point (batches of B rounds).
ROUNDS_PER_POINT = 16_384
_LAMBDA_ITERATIONS = 4


@dataclass(frozen=True)
class Rounds:
    """Draft rounds to sample batches from: ``confidences`` (n x K) conditional per-depth
    confidences, ``accepted`` (n,) drafts accepted at depth K (None: draw them from the
    confidences, a calibrated drafter), ``weights`` (n,) sampling weights."""

    confidences: Array
    accepted: NDArray[np.int64] | None
    weights: Array
    source: str

    @property
    def depth(self) -> int:
        return int(self.confidences.shape[1])

    @property
    def calibrated(self) -> bool:
        return self.accepted is None


@dataclass(frozen=True)
class Mixture:
    """A two-population fit: ``weight`` of rounds are sweeps accepting each draft with
    ``sweep``, the rest misses with ``miss``; ``rms`` the fit's error on the marginal."""

    weight: float
    sweep: float
    miss: float
    rms: float


def fit_mixture(acceptance: Acceptance, depth: int) -> Mixture:
    """Least-squares fit of w a_s^d + (1 - w) a_m^d to the marginal acceptance over
    d = 1..depth (grid of 0.01; ties go to the least heterogeneous fit)."""
    target = acceptance.marginal(depth)
    d = np.arange(1, depth + 1, dtype=float)
    levels = np.linspace(0.0, 1.0, 101)
    a_m = levels[:, None, None]
    w = levels[None, :, None]
    best = (np.inf, 0.0, 0.0, 0.0, np.inf)
    for a_s in levels:  # 101 slices of (a_miss x weight x depth): bounded memory at any depth
        err = ((w * a_s**d + (1.0 - w) * a_m**d - target) ** 2).mean(axis=-1)
        err = np.where(a_m[..., 0] <= a_s, err, np.inf)
        score = err + 1e-9 * (a_s - a_m[..., 0]) * np.minimum(w[..., 0], 1.0 - w[..., 0])
        j, k = np.unravel_index(int(np.argmin(score)), score.shape)
        if score[j, k] < best[0]:
            best = (float(score[j, k]), float(w[0, k, 0]), float(a_s), float(a_m[j, 0, 0]),
                    float(err[j, k]))
    return Mixture(best[1], best[2], best[3], float(np.sqrt(best[4])))


def mixture_rounds(mix: Mixture, depth: int) -> Rounds:
    """The two round types of ``mix`` (confidence = the type's rate at every depth)."""
    conf = np.array([[mix.sweep] * depth, [mix.miss] * depth], dtype=float)
    return Rounds(conf, None, np.array([mix.weight, 1.0 - mix.weight]),
                  f"two-population fit: {mix.weight:.2f} of rounds sweep at a = {mix.sweep:.2f}, "
                  f"the rest miss at a = {mix.miss:.2f} (rms {mix.rms:.3f} on the marginal)")


@dataclass(frozen=True)
class RaggedGrid:
    """Speedup over plain decode of each policy per (batch, context), and the best
    homogeneous gamma."""

    batch: NDArray[np.int64]
    context: NDArray[np.int64]
    speedups: dict[str, Array]  # policy -> (nb, ns)
    homogeneous_gamma: NDArray[np.int64]  # (nb, ns)
    mean_ragged_depth: Array  # (nb, ns)
    rounds: Rounds


#: Draft counts priced exactly per batch; beyond, C(B, D) is interpolated between this many.
_COST_POINTS = 1024


def _costs(dep: Deployment, b: int, contexts: Array, depth: int) -> Array:
    """C(B, D) for D = 0..B*depth drafts in the step: (ns, B*depth + 1) seconds. Large
    batches price at most ~_COST_POINTS counts (always every whole depth B*g) and
    interpolate linearly between them."""
    n = b * depth + 1
    at = np.arange(n, dtype=float)
    if n > _COST_POINTS:
        at = np.unique(np.concatenate((np.round(np.linspace(0, n - 1, _COST_POINTS)),
                                       b * np.arange(depth + 1.0))))
    S = contexts[:, None]
    args = (dep.model, dep.gpu, dep.parallelism, dep.engine)
    verify = np.broadcast_to(step_cost(*args, float(b), 1.0 + at[None, :] / b, S).seconds,
                             (len(contexts), at.size))
    g = np.arange(depth + 1, dtype=float)[None, :]
    c0 = verify[:, :1]
    draft = np.broadcast_to(draft_cost(dep.drafter, dep.gpu, dep.parallelism, dep.engine, float(b),
                                       g, S, c0), (len(contexts), depth + 1))
    mean = at / b
    lo = np.floor(mean).astype(int)
    hi = np.minimum(lo + 1, depth)
    frac = mean - lo
    priced = verify + draft[:, lo] * (1 - frac) + draft[:, hi] * frac
    if at.size == n:
        return np.asarray(priced, dtype=np.float64)
    full = np.arange(n, dtype=float)
    return np.asarray(np.stack([np.interp(full, at, row) for row in priced]), dtype=np.float64)


def _ranked(values: Array, accepted: NDArray[np.int64]) -> tuple[Array, Array]:
    """Per step (values: steps x B x K), drafts sorted by value, ties shallower first (so
    each sequence's drafts come in depth order and the first D ranked drafts are a set of
    per-sequence depths): expected and realised tokens with 0..B*K drafts taken."""
    steps, b, k = values.shape
    flat = values.reshape(steps, b * k)
    depth_key = np.broadcast_to(np.tile(np.arange(k), b), flat.shape)
    order = np.lexsort((depth_key, -flat), axis=-1)
    ranked = np.take_along_axis(flat, order, axis=-1)
    owner, depth = order // k, order % k + 1
    hit = depth <= np.take_along_axis(accepted, owner, axis=-1)
    zero = np.zeros((steps, 1))
    expected = b + np.concatenate((zero, np.cumsum(ranked, axis=-1)), axis=-1)
    realised = b + np.concatenate((zero, np.cumsum(hit, axis=-1)), axis=-1)
    return expected, realised


def _policy(gain: Array, realised: Array, cost: Array, lam0: float) -> tuple[float, NDArray[np.int64]]:
    """Dinkelbach on one policy: per step the option (steps x n) maximising gain - lam *
    cost, evaluated at ``realised``; lam starts at ``lam0`` (the best simpler policy's
    throughput, so the result is at least that when gain = realised) and is iterated."""
    lam = lam0
    best, best_pick = -np.inf, np.zeros(gain.shape[0], dtype=np.int64)
    for _ in range(_LAMBDA_ITERATIONS):
        pick = np.argmax(gain - lam * cost, axis=-1)
        tokens = np.take_along_axis(realised, pick[:, None], axis=-1).sum()
        thr = float(tokens / cost[pick].sum())
        if thr > best:
            best, best_pick = thr, pick
        lam = thr
    return best, np.asarray(best_pick, dtype=np.int64)


def _simulate_point(values: Array, accepted: NDArray[np.int64], calibrated: bool,
                    cost_d: Array, b: int, depth: int) -> tuple[dict[str, float], int, float]:
    """Speedups of the four policies at one (batch, context); ``cost_d`` is C(B, D) for
    D = 0..B*K; also the best homogeneous gamma and the ragged policy's mean depth."""
    steps = values.shape[0]
    g = np.arange(depth + 1)
    exp_g = b + np.concatenate((np.zeros((steps, 1)), np.cumsum(values.sum(axis=1), axis=-1)), axis=-1)
    real_g = (1 + np.minimum(accepted[..., None], g)).sum(axis=1)  # (steps, K+1)
    eval_g = exp_g if calibrated else real_g
    cost_g = cost_d[g * b]
    homo = eval_g.sum(axis=0) / (steps * cost_g)
    g_homo = int(np.argmax(homo))
    out = {"homogeneous": float(homo[g_homo])}
    out["gated"], gate = _policy(exp_g, eval_g, cost_g, out["homogeneous"])
    # ragged: trim the gated depth per sequence, lowest-confidence drafts first (seed 003)
    capped = np.where(np.arange(1, depth + 1)[None, None, :] <= gate[:, None, None], values, -1.0)
    expected, realised = _ranked(capped, accepted)
    allowed = np.arange(expected.shape[1])[None, :] <= b * gate[:, None]
    trim_gain = np.where(allowed, expected, -np.inf)
    out["ragged"], pick = _policy(trim_gain, expected if calibrated else realised, cost_d, out["gated"])
    # ragged_free: any per-sequence depths (the exact optimum; may deepen confident sequences)
    expected, realised = _ranked(values, accepted)
    out["ragged_free"], _ = _policy(expected, expected if calibrated else realised, cost_d, out["ragged"])
    truth = (np.arange(1, depth + 1)[None, None, :] <= accepted[..., None]).astype(float)
    known, _ = _ranked(truth, accepted)
    out["oracle"], _ = _policy(known, known, cost_d, out["ragged_free"])
    plain = b / cost_d[0]
    return {k: v / plain for k, v in out.items()}, g_homo, float(pick.mean() / b)


def simulate(dep: Deployment, rounds: Rounds, *, seed: int = 0,
             rounds_per_point: int = ROUNDS_PER_POINT) -> RaggedGrid:
    """The four policies' speedups at every (batch, context) of ``dep``'s workload."""
    rng = np.random.default_rng(seed)
    depth = min(rounds.depth, dep.gamma_max) if rounds.calibrated else rounds.depth
    conf = rounds.confidences[:, :depth]
    values_all = np.cumprod(conf, axis=-1)
    p = rounds.weights / rounds.weights.sum()
    b_arr = np.asarray(dep.workload.batch_sizes, dtype=np.int64)
    s_arr = np.asarray(dep.workload.context_lengths, dtype=np.int64)
    sp = {k: np.zeros((len(b_arr), len(s_arr))) for k in POLICIES}
    g_homo = np.zeros((len(b_arr), len(s_arr)), dtype=np.int64)
    mean_depth = np.zeros((len(b_arr), len(s_arr)))
    for i, b in enumerate(b_arr):
        b = int(b)
        steps = max(32, rounds_per_point // b)
        idx = rng.choice(len(p), size=(steps, b), p=p)
        values = np.asarray(values_all[idx], dtype=np.float64)
        if rounds.accepted is None:
            hits = rng.random((steps, b, depth)) < conf[idx]
            accepted = np.cumprod(hits, axis=-1).sum(axis=-1).astype(np.int64)
        else:
            accepted = np.minimum(rounds.accepted[idx], depth)
        costs = _costs(dep, b, s_arr.astype(float), depth)
        for j in range(len(s_arr)):
            res, gh, md = _simulate_point(values, accepted, rounds.calibrated, costs[j], b, depth)
            for k in POLICIES:
                sp[k][i, j] = res[k]
            g_homo[i, j] = gh
            mean_depth[i, j] = md
    return RaggedGrid(b_arr, s_arr, sp, g_homo, mean_depth, rounds)


def rounds_for(dep: Deployment) -> Rounds:
    """The mixture fitted to ``dep``'s per-position acceptance, over its gamma_max."""
    return mixture_rounds(fit_mixture(dep.acceptance, dep.gamma_max), dep.gamma_max)


#: Said with every ragged result.
HEADROOM_NOTE = ("ragged/oracle are headroom: vLLM and SGLang verify one draft depth per batch "
                 "and cannot run per-sequence (ragged) depths efficiently today")
