"""Mixture-of-experts feed-forward: the expert "coupon-collector" tax (seed 000 appendix).

A pass over N tokens makes N*k routed picks, but moves only the *distinct* experts it
touches. Under uniform routing the expected number of distinct experts is

    A(N) = E * (1 - (1 - k/E)^N),

~N*k for N << E/k (every token drags in fresh experts) and -> E past the knee N ~ E/k.
Shared experts are always resident. Skewed routing and co-activation of consecutive
positions (seed 003) replace A(N) by D(B, T) of :mod:`spectune.core.cost.routing`; uniform
routing keeps the formula above, bit for bit.
"""

from __future__ import annotations

import numpy as np

from spectune.core.cost.kernels import (
    kernel_price,
    moe_bandwidth_fraction,
    moe_call_seconds,
    moe_flops_fraction,
)
from spectune.core.cost.roofline import Array, Component, Work
from spectune.core.cost.routing import distinct_experts_bt
from spectune.core.deployment import Parallelism
from spectune.core.hardware import GPU, Kernels, dtype_bytes
from spectune.core.model import UNIFORM, MoE, Routing


def distinct_experts(tokens: Array, n_experts: int, top_k: int) -> Array:
    """A(N): expected distinct routed experts touched by ``tokens`` tokens (uniform routing)."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** np.asarray(tokens, dtype=float))


def distinct_experts_slope(tokens: Array, n_experts: int, top_k: int) -> Array:
    """A'(N) = -E ln(1 - k/E) (1 - k/E)^N: fresh experts the next token brings in."""
    q = 1.0 - top_k / n_experts
    return -n_experts * np.log(q) * q ** np.asarray(tokens, dtype=float)


def knee(n_experts: int, top_k: int) -> float:
    """The batch past which every expert is resident, N ~ E/k."""
    return n_experts / top_k


def touched_experts(moe: MoE, par: Parallelism, B: Array, T: Array,
                    routing: Routing = UNIFORM) -> Array:
    """Distinct routed experts (whole, or tp slices of them) one GPU reads in a pass of B
    sequences x T tokens: A(B/dp*T) with ``ep == 1``, the local share of A(B*T) with EP;
    skewed or co-activated ``routing`` replaces A by D(B, T) (:mod:`spectune.core.cost.routing`)."""
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp
    if par.ep == 1:
        if not routing.uniform:
            return distinct_experts_bt(routing, moe.n_experts, moe.top_k,
                                       np.asarray(B, dtype=float) / par.dp, T)
        return distinct_experts(tokens_rank, moe.n_experts, moe.top_k)
    if not routing.uniform:
        return distinct_experts_bt(routing, moe.n_experts, moe.top_k, B, T) / par.ep
    tokens_all = tokens_rank * par.dp
    # Each local expert is touched with the same probability as any expert.
    return moe.n_experts / par.ep * (1.0 - (1.0 - moe.top_k / moe.n_experts) ** tokens_all)


def moe_work(moe: MoE, hidden: int, expert_dtype: str, act_dtype: str, par: Parallelism,
             B: Array, T: Array, routing: Routing = UNIFORM) -> Work:
    """One MoE layer on one GPU for B sequences x T tokens.

    ``ep == 1``: each dp rank holds every expert sharded ``tp`` ways and routes its own
    B/dp*T tokens. ``ep == tp*dp``: each GPU holds E/ep whole experts and receives its
    share of all B*T tokens' picks (the all-to-all is priced in :mod:`spectune.core.cost.comm`).
    Under non-uniform ``routing`` a GPU holding E/ep experts is charged 1/ep of the
    distinct experts (the average GPU; placement of hot experts is not modelled).
    """
    b_w = dtype_bytes(expert_dtype)
    b_a = dtype_bytes(act_dtype)
    p_expert = moe.expert_params(hidden)
    p_shared = moe.shared_params(hidden)
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp  # tokens of one dp rank

    touched = touched_experts(moe, par, B, T, routing)
    if par.ep == 1:
        routed_flops = 2.0 * tokens_rank * moe.top_k * p_expert / par.tp
        routed_bytes = touched * p_expert * b_w / par.tp
        routed_acts = tokens_rank * moe.top_k * 2 * hidden * b_a
    else:
        tokens_all = tokens_rank * par.dp
        routed_flops = 2.0 * tokens_all * moe.top_k * p_expert / par.ep
        routed_bytes = touched * p_expert * b_w
        routed_acts = tokens_all * moe.top_k / par.ep * 2 * hidden * b_a

    shared_flops = 2.0 * tokens_rank * p_shared / par.tp
    shared_bytes = p_shared * b_w / par.tp + 0.0 * tokens_rank
    shared_acts = tokens_rank * (2 * hidden * b_a if moe.n_shared else 0.0)
    return Work(
        flops=routed_flops + shared_flops,
        weight_bytes=routed_bytes + shared_bytes,
        kv_bytes=np.zeros_like(routed_flops),
        act_bytes=routed_acts + shared_acts,
        dtype=expert_dtype,
    )


def tokens_per_expert(moe: MoE, par: Parallelism, B: Array, T: Array, touched: Array) -> Array:
    """Rows each touched expert (slice) on one GPU computes: the GPU's routed picks over its
    touched experts, B/dp*T*k / touched with ``ep == 1``, B*T*k/ep / touched with EP."""
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp
    picks = tokens_rank * moe.top_k if par.ep == 1 else tokens_rank * par.dp * moe.top_k / par.ep
    return np.asarray(picks / np.maximum(touched, 1e-9), dtype=np.float64)


def moe_price(moe: MoE, hidden: int, expert_dtype: str, act_dtype: str, par: Parallelism,
              B: Array, T: Array, routing: Routing, kernels: Kernels, gpu: GPU,
              shared_calls: float = 0.0) -> tuple[Work, Component]:
    """Work and kernel-true price of one MoE layer on one GPU (:mod:`spectune.core.cost.kernels`):

        t = t_call(dtype) + t_expert * D + shared_calls + max(FLOPs / (e_c(R) * peak),
                                                      bytes / (e_b(dtype) * BW)),

    one grouped-GEMM call (its fixed cost by expert format,
    :func:`~spectune.core.cost.kernels.moe_call_seconds`), a tile pass per distinct expert touched
    (D), ``shared_calls`` seconds of launches for the shared experts' GEMMs; compute at the GEMM
    curve of the rows an expert runs, at least one M tile (R = max(n, tile),
    :func:`~spectune.core.cost.kernels.moe_flops_fraction`); weights at the expert format's
    streaming efficiency (:func:`~spectune.core.cost.kernels.moe_bandwidth_fraction`)."""
    w = moe_work(moe, hidden, expert_dtype, act_dtype, par, B, T, routing)
    touched = touched_experts(moe, par, B, T, routing)
    launch = moe_call_seconds(kernels, expert_dtype) + kernels.moe_expert * touched + shared_calls
    c = kernel_price(w, gpu, launch, moe_bandwidth_fraction(kernels, expert_dtype),
                     moe_flops_fraction(kernels, tokens_per_expert(moe, par, B, T, touched)))
    return w, c
