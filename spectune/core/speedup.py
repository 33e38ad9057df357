"""Throughput speedup of speculation over plain decode (seed 000):

    Sp(gamma) = m(gamma) * C0(B, S) / (C_verify(B, gamma + 1, S) + C_draft(B, gamma, S)),

with C0(B, S) = C_verify(B, 1, S). Evaluated over whole batch x context x gamma grids. On an
aggregated worker (prompt/output lengths known, spectune.core.cost.prefill) each step also carries
the prefill F(m) arriving per step, which speculation does not shorten: C_verify and C0 are
the mean steps with it, so Sp(gamma) = m(gamma) (C0 + F(1)) / (C_verify + C_draft + F(m(gamma))).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spectune.core.acceptance import Acceptance
from spectune.core.cost import draft_cost, step_cost
from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment
from spectune.core.draft_share import draft_length, draft_share
from spectune.core.tree import expected_tokens as tree_expected_tokens
from spectune.core.tree import verify_width


def closed_form(alpha: ArrayLike, gamma: ArrayLike, draft_cost_ratio: ArrayLike) -> Array:
    """Seed 004's speedup with draft cost ratio c and a free verify:
    (1 - alpha^(gamma+1)) / ((1 - alpha) (1 + gamma c))."""
    a = np.asarray(alpha, dtype=float)
    g = np.asarray(gamma, dtype=float)
    c = np.asarray(draft_cost_ratio, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens = np.where(a < 1.0, (1.0 - a ** (g + 1)) / (1.0 - a), g + 1)
    return tokens / (1.0 + g * c)


@dataclass(frozen=True)
class SpeedupGrid:
    """Sp over ``batch`` (nb) x ``context`` (ns) x ``gamma`` (ng) and the costs behind it,
    in seconds per step per GPU."""

    batch: NDArray[np.int64]
    context: NDArray[np.int64]
    gamma: NDArray[np.int64]
    expected_tokens: Array  # (ng,)
    c0: Array  # (nb, ns)
    verify: Array  # (nb, ns, ng)
    draft: Array  # (nb, ns, ng)
    #: (nb, ns, ng) the mean prefill share an aggregated step carries (spectune.core.cost.prefill),
    #: already inside ``verify`` and ``c0``; None: decode only (no lengths, or disaggregated)
    prefill: Array | None = None

    @property
    def speedup(self) -> Array:
        return self.expected_tokens * self.c0[..., None] / (self.verify + self.draft)


def speedup_grid(dep: Deployment, batch: ArrayLike | None = None,
                 context: ArrayLike | None = None, gamma_max: int | None = None,
                 *, achieved: bool = True) -> SpeedupGrid:
    """Evaluate the speedup of every gamma in 0..gamma_max at every (batch, context)."""
    b = np.asarray(dep.workload.batch_sizes if batch is None else batch, dtype=np.int64)
    s = np.asarray(dep.workload.context_lengths if context is None else context, dtype=np.int64)
    gmax = dep.gamma_max if gamma_max is None else gamma_max
    g = np.arange(gmax + 1, dtype=np.int64)
    B = b[:, None, None].astype(float)
    S = s[None, :, None].astype(float)
    G = g[None, None, :].astype(float)
    m_drafted = tree_expected_tokens(dep.acceptance, dep.drafter, g)
    m, verify, prefill = verified(dep, B, S, G, m_drafted[None, None, :], achieved=achieved)
    verify = np.broadcast_to(verify, (len(b), len(s), len(g)))
    m = m.reshape(-1)
    if prefill is not None:
        prefill = np.broadcast_to(prefill, verify.shape)
    c0 = verify[..., 0]
    draft = draft_cost(dep.drafter, dep.gpu, dep.parallelism, dep.engine, B, G, S,
                       c0[..., None], achieved=achieved)
    return SpeedupGrid(b, s, g, m, c0, verify, np.broadcast_to(draft, verify.shape), prefill)


def verified(dep: Deployment, B: ArrayLike, S: ArrayLike, G: ArrayLike, m_drafted: ArrayLike, *,
             achieved: bool = True) -> tuple[Array, Array, Array | None]:
    """(m, C_verify, F): tokens a verify commits per sequence, the mean verify step (seconds
    per GPU, with the prefill it carries on an aggregated worker) and that prefill share F
    (None: decode only), at batch B, context S and draft length G whose drafted steps commit
    ``m_drafted`` tokens; all broadcast together.

    Variable-length drafts (n-gram) verify and yield their observed share of a full draft:
    a share of steps carries one (falling with gamma when the undrafted share is known,
    spectune.core.draft_share), holding d(gamma) of its gamma tokens (a tree: num_draft_tokens)."""
    G = np.asarray(G, dtype=float)
    md = np.asarray(m_drafted, dtype=float)
    share = steps_with_draft(dep, md)
    fill = draft_length(dep.draft_continuation, G) / np.maximum(G, 1.0)
    T = 1.0 + share * fill * (verify_width(dep.drafter, G) - 1.0)
    verify = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, B, T, S, achieved=achieved,
                       speculative=G > 0).seconds
    m = 1.0 + share * (md - 1.0)
    if not dep.workload.aggregated:
        return m, verify, None
    from spectune.core.cost.prefill import aggregated_prefill  # the mean step: decode plus its prefill

    prefill = aggregated_prefill(dep, B, T, S, G, m, achieved=achieved)
    return m, verify + prefill, prefill


def steps_with_draft(dep: Deployment, m_drafted: ArrayLike) -> Array:
    """The share of sequence steps carrying a draft when a drafted step commits
    ``m_drafted`` tokens: ``draft_fraction`` (1 for a model drafter), or for n-gram drafts
    whose undrafted share was observed, falling with the draft's yield (spectune.core.draft_share)."""
    m = np.asarray(m_drafted, dtype=float)
    if dep.undrafted_share is None:
        return np.full(m.shape, dep.draft_fraction)
    return draft_share(dep.undrafted_share, m)


def verify_yield(dep: Deployment, gamma: ArrayLike, acceptance: Acceptance | None = None) -> Array:
    """m(gamma), tokens one verify commits per sequence (``acceptance``: the deployment's
    unless given); variable-length drafts (n-gram) only on the steps that carry one."""
    acc = dep.acceptance if acceptance is None else acceptance
    m_drafted = tree_expected_tokens(acc, dep.drafter, gamma)
    return 1.0 + steps_with_draft(dep, m_drafted) * (m_drafted - 1.0)


@dataclass(frozen=True)
class PointSpeedup:
    """Sp of one gamma at one operating point and the costs behind it (seconds per step)."""

    expected_tokens: float
    plain_step: float
    verify: float
    draft: float
    speedup: float


def point_speedup(dep: Deployment, batch: int, context: int, gamma: int) -> PointSpeedup:
    """The roofline speedup of ``gamma`` at one (batch, context)."""
    one = replace(dep, workload=replace(dep.workload, batch_sizes=(batch,), context_lengths=(context,)),
                  gamma_max=max(gamma, 1))
    g = speedup_grid(one)
    return PointSpeedup(float(g.expected_tokens[gamma]), float(g.c0[0, 0]),
                        float(g.verify[0, 0, gamma]), float(g.draft[0, 0, gamma]),
                        float(g.speedup[0, 0, gamma]))
