"""Distinct routed experts touched by B sequences x T positions, under skewed routing and
co-activation of consecutive positions (seed 003, "The first story: depth can be cheaper
than width").

Each token includes expert e among its k picks with probability pi_e (sum_e pi_e = k):
pi_e = k p_e for the rank-share law p_e ~ exp(-decay * r_e / E) or measured loads, capped
at 1 (water-filled so the sum stays k); uniform routing is pi_e = k / E.

Consecutive positions of one sequence are a two-state Markov chain per expert: the next
position keeps a token's expert with probability f + (1 - f) pi_e and picks it afresh with
(1 - f) pi_e. This keeps pi_e stationary, and makes the share of a token's experts that
the previous position also used

    F = f + (1 - f) * c,   c = sum_e pi_e^2 / k   (chance overlap; k / E if uniform),

so a measured F gives f = (F - c) / (1 - c). One sequence of T positions misses expert e
with probability (1 - pi_e) (1 - (1 - f) pi_e)^(T - 1); B independent sequences with
probability that to the power B, and the expected distinct experts are

    D(B, T) = sum_e [1 - ((1 - pi_e) (1 - (1 - f) pi_e)^(T - 1))^B],

averaged over the layers when loads are per layer. f = 0 and pi_e = k / E give the coupon
collector A(B T) = E (1 - (1 - k/E)^(B T)) (seed 000): width (B sequences) and depth
(T positions) then cost the same; co-activation makes depth cheaper, skew makes both
cheaper. D depends on the depths of a ragged batch only through their sum.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spectune.core.cost.roofline import Array
from spectune.core.model import Routing

#: Largest inclusion probability: keeps log(1 - pi) finite for an always-picked expert.
_PI_MAX = 1.0 - 1e-12


def rank_shares(n_experts: int, decay: float) -> Array:
    """p_r ~ exp(-decay * r / E), r = 0..E-1, normalised to sum 1."""
    p = np.exp(-decay * np.arange(n_experts) / n_experts)
    return np.asarray(p / p.sum(), dtype=np.float64)


def inclusion(shares: ArrayLike, top_k: int) -> Array:
    """pi_e = k p_e capped at 1, the excess spread over the uncapped experts (rows of
    ``shares`` are layers)."""
    p = np.atleast_2d(np.asarray(shares, dtype=float))
    p = p / p.sum(axis=-1, keepdims=True)
    pi = top_k * p
    for _ in range(p.shape[-1]):  # water-filling: at most E rounds, usually none
        over = pi > 1.0
        if not over.any():
            break
        capped = np.where(over, 1.0, pi)
        free = np.where(over, 0.0, pi)
        room = top_k - capped.sum(axis=-1, keepdims=True) + free.sum(axis=-1, keepdims=True)
        scale = np.where(free.sum(axis=-1, keepdims=True) > 0,
                         room / np.maximum(free.sum(axis=-1, keepdims=True), 1e-300), 1.0)
        pi = np.where(over, 1.0, pi * scale)
    return np.asarray(np.minimum(pi, _PI_MAX), dtype=np.float64)


def layer_inclusion(routing: Routing, n_experts: int, top_k: int) -> Array:
    """pi (layers x E) of ``routing`` for a block of ``top_k`` of ``n_experts``."""
    if routing.loads:
        rows = np.asarray(routing.loads, dtype=float)
        if rows.shape[-1] != n_experts:
            raise ValueError(f"routing loads have {rows.shape[-1]} experts, the model has {n_experts}")
        return inclusion(rows, top_k)
    return inclusion(rank_shares(n_experts, routing.decay), top_k)


def chance_overlap(pi: Array, top_k: int) -> Array:
    """c = sum_e pi_e^2 / k per layer: the overlap of two unrelated tokens' experts."""
    return np.asarray((pi**2).sum(axis=-1) / top_k, dtype=np.float64)


def persistence(routing: Routing, pi: Array, top_k: int) -> Array:
    """f per layer from the measured co-activation F: (F - c) / (1 - c), clipped to [0, 1]."""
    c = chance_overlap(pi, top_k)
    return np.asarray(np.clip((routing.coactivation - c) / (1.0 - c), 0.0, 1.0), dtype=np.float64)


def distinct_experts_bt(routing: Routing, n_experts: int, top_k: int,
                        sequences: ArrayLike, positions: ArrayLike) -> Array:
    """D(B, T): expected distinct routed experts per MoE layer touched by ``sequences`` x
    ``positions`` consecutive tokens each (arrays broadcast; fractional values allowed)."""
    Bs = np.asarray(sequences, dtype=float)
    Ts = np.asarray(positions, dtype=float)
    if routing.uniform:
        q = 1.0 - top_k / n_experts
        return np.asarray(n_experts * (1.0 - q ** (Bs * Ts)), dtype=np.float64)
    pi = layer_inclusion(routing, n_experts, top_k)  # (L, E)
    f = persistence(routing, pi, top_k)[:, None]  # (L, 1)
    first = np.log1p(-pi)
    later = np.log1p(-(1.0 - f) * pi)
    shape = np.broadcast_shapes(Bs.shape, Ts.shape)
    b = np.broadcast_to(Bs, shape)[..., None, None]
    t = np.broadcast_to(Ts, shape)[..., None, None]
    miss = np.exp(b * (first + (t - 1.0) * later))
    per_layer = (1.0 - miss).sum(axis=-1)  # (..., L)
    return np.asarray(per_layer.mean(axis=-1), dtype=np.float64)


def expert_shares_table(routing: Routing, n_experts: int, top_k: int) -> NDArray[np.float64]:
    """pi_e / k sorted busiest first, averaged over layers: the rank-share curve."""
    pi = layer_inclusion(routing, n_experts, top_k)
    return np.asarray(np.sort(pi, axis=-1)[:, ::-1].mean(axis=0) / top_k, dtype=np.float64)
