"""Collectives between GPUs of one instance, per layer: tensor-parallel all-reduce and the
expert-parallel exchange around each MoE layer.

Each collective is priced by the algorithm the engines run at its size
(:mod:`spectune.core.cost.collectives`: custom one-shot / two-shot all-reduce, NCCL ring all-reduce,
all-gather and reduce-scatter, DeepEP low-latency dispatch and combine), with its step count
and per-step latency for the GPU's link. The latency does not shrink with fewer tokens: the
"communications tax" that each speculated token pays without amortising it (seed 000
conclusion; seed 002 on EP).

The expert-parallel exchange (``Engine.ep_exchange``, cited per engine in
profiles/engines/*.yaml) is one of:

- ``allgather_reducescatter`` (vLLM's default ``--all2all-backend``, ``vllm/config/parallel.py``
  ``ParallelConfig.all2all_backend``; SGLang's default ``--moe-a2a-backend none`` with DP
  attention gathers and scatters the same way, ``dp_attention.py`` MAX_LEN under CUDA graphs):
  with ``dp`` > 1 every token of the step is all-gathered to the ``dp`` data-parallel ranks
  before the MoE and its output reduce-scattered back after it, each an NCCL ring of
  ``B T hidden`` activation bytes in all, (dp - 1) / dp of them received per GPU; with tp > 1
  the experts' partial sums are also all-reduced over TP, as a dense FFN's are. With dp = 1
  there is nothing to gather (vLLM builds the all2all manager only when dp > 1,
  ``FusedMoEParallelConfig.use_all2all_kernels``): the MoE output is all-reduced over TP.
  The picks' ids and weights gathered with the tokens (top_k x 8 bytes a token against
  hidden x 2) are left out.
- ``deepep_low_latency`` (DeepEP low-latency kernels, vLLM ``--all2all-backend
  deepep_low_latency``, SGLang ``--moe-a2a-backend deepep``): each token's top_k picks go to the
  GPUs holding them (dispatch, FP8) and come back (combine, bf16), one all-to-all step each;
  the attention output is still all-reduced over TP.
"""

from __future__ import annotations

import numpy as np

from spectune.core.cost.collectives import allreduce_parts, alltoall_parts, gather_parts
from spectune.core.cost.roofline import Array, Component
from spectune.core.deployment import EP_EXCHANGES, Parallelism
from spectune.core.hardware import GPU, dtype_bytes

#: DeepEP-style dispatch sends FP8 activations (plus scales) and combines in bf16
#: (deepseek-ai/DeepEP README, low-latency kernels).
DISPATCH_DTYPE = "fp8"
COMBINE_DTYPE = "bf16"
#: The expert-parallel exchanges (``EP_EXCHANGES``); the first is what an engine without
#: the key runs.
DEEPEP_LL, AG_RS = EP_EXCHANGES


def comm_component(gpu: GPU, par: Parallelism, hidden: int, act_dtype: str, top_k: int,
                   is_moe: bool, B: Array, T: Array, exchange: str = DEEPEP_LL) -> Component:
    """Collectives of one layer on one GPU (``bytes``: bytes one GPU puts on its links);
    ``exchange``: the expert-parallel exchange (:data:`EP_EXCHANGES`, module docstring)."""
    if exchange not in EP_EXCHANGES:
        raise ValueError(f"ep exchange must be one of {', '.join(EP_EXCHANGES)}, got {exchange!r}")
    tokens_rank = np.asarray(B, dtype=float) * T / par.dp
    zero = np.zeros_like(tokens_rank)
    parts: list[tuple[Array, Array, Array]] = []
    deepep = is_moe and par.ep > 1 and exchange == DEEPEP_LL
    if par.tp > 1:
        # Attention output all-reduce, and the FFN's unless experts move by all-to-all.
        message = tokens_rank * hidden * dtype_bytes(act_dtype)
        parts += [allreduce_parts(gpu, par.tp, message)] * (1 if deepep else 2)
    if deepep:
        picks = tokens_rank * par.dp / par.ep * top_k  # routed picks leaving one GPU
        parts += [alltoall_parts(gpu, par.ep, picks * hidden * dtype_bytes(dtype))
                  for dtype in (DISPATCH_DTYPE, COMBINE_DTYPE)]
    elif is_moe and par.ep > 1 and par.dp > 1:
        # all-gather before the experts, reduce-scatter after: the step's every token
        gathered = tokens_rank * par.dp * hidden * dtype_bytes(act_dtype)
        parts += [gather_parts(gpu, par.dp, gathered)] * 2
    t_fixed = sum((p[0] for p in parts), zero)
    t_bw = sum((p[1] for p in parts), zero)
    link_bytes = sum((p[2] for p in parts), zero)
    return Component(zero, link_bytes, t_bw + t_fixed, zero, t_bw, t_fixed)
