"""Collectives between GPUs of one instance, per layer: tensor-parallel all-reduce and
expert-parallel all-to-all (dispatch + combine).

Each collective is priced by the algorithm the engines run at its size
(:mod:`spectune.cost.collectives`: custom one-shot / two-shot all-reduce, NCCL ring, DeepEP
low-latency dispatch and combine), with its step count and per-step latency for the GPU's
link. The latency does not shrink with fewer tokens: the "communications tax" that each
speculated token pays without amortising it (seed 000 conclusion; seed 002 on EP).
"""

from __future__ import annotations

import numpy as np

from spectune.cost.collectives import allreduce_parts, alltoall_parts
from spectune.cost.roofline import Array, Component
from spectune.deployment import Parallelism
from spectune.hardware import GPU, dtype_bytes

#: DeepEP-style dispatch sends FP8 activations (plus scales) and combines in bf16
#: (deepseek-ai/DeepEP README, low-latency kernels).
DISPATCH_DTYPE = "fp8"
COMBINE_DTYPE = "bf16"


def comm_component(gpu: GPU, par: Parallelism, hidden: int, act_dtype: str, top_k: int,
                   is_moe: bool, B: Array, T: Array) -> Component:
    """Collectives of one layer on one GPU (``bytes``: bytes one GPU puts on its links)."""
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp
    zero = np.zeros_like(tokens_rank)
    link_bytes, t_fixed, t_bw = zero, zero, zero
    if par.tp > 1:
        # Attention output all-reduce, and the FFN's unless experts move by all-to-all.
        n_allreduce = 1 if (is_moe and par.ep > 1) else 2
        message = tokens_rank * hidden * dtype_bytes(act_dtype)
        lat, wire, moved = allreduce_parts(gpu, par.tp, message)
        link_bytes = link_bytes + n_allreduce * moved
        t_fixed, t_bw = t_fixed + n_allreduce * lat, t_bw + n_allreduce * wire
    if is_moe and par.ep > 1:
        picks = tokens_rank * par.dp / par.ep * top_k  # routed picks leaving one GPU
        for dtype in (DISPATCH_DTYPE, COMBINE_DTYPE):
            lat, wire, moved = alltoall_parts(gpu, par.ep, picks * hidden * dtype_bytes(dtype))
            link_bytes = link_bytes + moved
            t_fixed, t_bw = t_fixed + lat, t_bw + wire
    return Component(zero, link_bytes, t_bw + t_fixed, zero, t_bw, t_fixed)
