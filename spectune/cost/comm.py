"""Collectives between GPUs of one instance, per layer: tensor-parallel all-reduce and
expert-parallel all-to-all (dispatch + combine).

Time = fixed latency per collective + bytes sent per GPU / per-GPU scale-up bandwidth.
The latency does not shrink with fewer tokens: the "communications tax" that each
speculated token pays without amortising it (seed 000 conclusion; seed 002 on EP).
"""

from __future__ import annotations

import numpy as np

from spectune.cost.roofline import Array, Component
from spectune.deployment import Parallelism
from spectune.hardware import GPU, dtype_bytes

#: DeepEP-style dispatch sends FP8 activations (plus scales) and combines in bf16
#: (deepseek-ai/DeepEP README, low-latency kernels).
DISPATCH_DTYPE = "fp8"
COMBINE_DTYPE = "bf16"


def comm_component(gpu: GPU, par: Parallelism, hidden: int, act_dtype: str, top_k: int,
                   is_moe: bool, B: Array, T: Array) -> Component:
    """Collectives of one layer on one GPU."""
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp
    b_a = dtype_bytes(act_dtype)
    link_bytes = np.zeros_like(tokens_rank)
    collectives = 0
    if par.tp > 1:
        # Attention output all-reduce, and the FFN's unless experts move by all-to-all.
        n_allreduce = 1 if (is_moe and par.ep > 1) else 2
        ring = 2.0 * (par.tp - 1) / par.tp  # bytes sent per byte reduced, ring algorithm
        link_bytes = link_bytes + n_allreduce * ring * tokens_rank * hidden * b_a
        collectives += n_allreduce
    if is_moe and par.ep > 1:
        tokens_gpu = tokens_rank * par.dp / par.ep
        off_gpu = (par.ep - 1) / par.ep
        per_pick = hidden * (dtype_bytes(DISPATCH_DTYPE) + dtype_bytes(COMBINE_DTYPE))
        link_bytes = link_bytes + tokens_gpu * top_k * off_gpu * per_pick
        collectives += 2
    if collectives == 0:
        zero = np.zeros_like(tokens_rank)
        return Component(zero, zero, zero, zero, zero, zero)
    t_bw = link_bytes / gpu.link_bandwidth
    t_fixed = collectives * gpu.link_latency + np.zeros_like(t_bw)
    zero = np.zeros_like(t_bw)
    return Component(zero, link_bytes, t_bw + t_fixed, zero, t_bw, t_fixed)
