"""Weight-streaming GEMMs whose bytes do not grow with the batch: attention projections,
dense FFNs and the LM head (seed 000: "C_attn proj ... reuses a fixed set of weights").

Each reads its weights once per pass (sharded ``tp`` ways) and does 2 FLOPs per weight per
token; activations are read in and written out per token.
"""

from __future__ import annotations

import numpy as np

from spectune.core.cost.roofline import Array, Work
from spectune.core.deployment import Parallelism
from spectune.core.hardware import dtype_bytes


def gemm_work(params: float, in_width: float, out_width: float, weight_dtype: str,
              act_dtype: str, par: Parallelism, B: Array, T: Array) -> Work:
    """A tp-sharded weight GEMM of ``params`` weights over the B/dp*T tokens of one dp rank.

    ``in_width`` / ``out_width`` are the activation elements read and written per token
    (before sharding: the input is read whole by every rank, the output is sharded)."""
    tokens = np.asarray(B, dtype=float) * T / par.dp
    b_a = dtype_bytes(act_dtype)
    return Work(
        flops=2.0 * tokens * params / par.tp,
        weight_bytes=params * dtype_bytes(weight_dtype) / par.tp + 0.0 * tokens,
        kv_bytes=0.0 * tokens,
        act_bytes=tokens * (in_width + out_width / par.tp) * b_a,
        dtype=weight_dtype,
    )


def lm_head_work(vocab: int, hidden: int, head_dtype: str, act_dtype: str,
                 par: Parallelism, B: Array, T: Array) -> Work:
    """Logits for every verified position: a vocab x hidden GEMM (vocab sharded by tp),
    writing ``vocab`` logits per token."""
    return gemm_work(float(vocab) * hidden, hidden, vocab, head_dtype, act_dtype, par, B, T)
