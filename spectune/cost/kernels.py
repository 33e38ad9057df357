"""Kernel-true prices: what the real kernel of each component takes at its shape.

A roofline with one global peak fraction cannot see small-shape inefficiency: a decode-sized
kernel pays a fixed cost per call (launch, prologue, tail, split-K reduction) and reaches a
lower share of peak bandwidth than a streaming copy. Each component family is priced as

    t = calls * t_call + max(FLOPs / (e_c * peak FLOP/s), bytes / (e_b * peak bandwidth))

with its own constants, fitted to measured per-kernel timings (aiconfigurator-core 0.12.0,
``systems/data/<gpu>/{gemm,moe,attention,mla}/sglang/0.5.14``, Apache-2.0; the fit is
``scripts/fit_kernels.py``, its constants and row filters are cited in profiles/gpus/*.yaml):

- dense GEMM (``attn-proj``, ``dense-ffn``, ``lm-head``, shared experts): ``t_call`` per GEMM,
  compute efficiency ``e_c * M / (M + m_half)`` rising with the M = tokens of the pass;
- grouped-GEMM MoE: ``t_call`` per MoE layer plus ``t_expert`` per distinct expert touched
  (the fused kernel walks one tile set per active expert); weights at ``e_b``;
- decode attention, GQA and MLA/compressed: ``t_call`` per layer, bandwidth efficiency
  ``e_b * P / (P + p_half)`` rising with the parallel work P (sequences x KV heads per GPU for
  GQA, sequences for MLA-style latent caches, whose heads share one latent).

GPUs without measured kernels use :func:`default_kernels`: the H100 fit's fixed costs with
the GPU profile's own achievable fractions.
"""

from __future__ import annotations

import numpy as np

from spectune.cost.roofline import Array, Component, Work
from spectune.hardware import GPU, Kernels

#: H100 SXM, aiconfigurator-core 0.12.0 sglang 0.5.14 tables (profiles/gpus/h100-sxm.yaml).
H100_FIT = Kernels(
    gemm_call=3.96e-6, gemm_bandwidth_fraction=0.827, gemm_flops_fraction=1.0, gemm_m_half=207.0,
    moe_call=25.4e-6, moe_expert=0.109e-6, moe_bandwidth_fraction=0.841,
    gqa_call=12.2e-6, gqa_bandwidth_fraction=0.809, gqa_parallel_half=0.0,
    mla_call=14.5e-6, mla_bandwidth_fraction=0.78, mla_parallel_half=0.963,
    source="default: H100 fixed costs, this GPU's achievable fractions",
)


def default_kernels(gpu: GPU) -> Kernels:
    """Kernels of a GPU with no measured tables: H100's fixed costs per call (launch and
    tail latencies are similar across recent GPUs) with the profile's own achievable
    bandwidth and FLOP fractions."""
    if gpu.kernels is not None:
        return gpu.kernels
    bw, fl = gpu.bandwidth_fraction, gpu.flops_fraction
    return Kernels(
        H100_FIT.gemm_call, bw, fl, H100_FIT.gemm_m_half,
        H100_FIT.moe_call, H100_FIT.moe_expert, bw,
        H100_FIT.gqa_call, bw, H100_FIT.gqa_parallel_half,
        H100_FIT.mla_call, bw, H100_FIT.mla_parallel_half,
        H100_FIT.source,
    )


def kernel_price(work: Work, gpu: GPU, fixed_seconds: Array | float,
                 bandwidth_fraction: Array | float, flops_fraction: Array | float) -> Component:
    """``fixed + max(FLOPs / (flops_fraction * peak), bytes / (bandwidth_fraction * BW))``."""
    t_compute = work.flops / (gpu.flops_rate(work.dtype, achieved=False) * flops_fraction)
    t_memory = work.bytes / (gpu.hbm_bandwidth * bandwidth_fraction)
    fixed = np.asarray(fixed_seconds, dtype=float) + np.zeros_like(t_compute)
    return Component(work.flops, work.bytes, fixed + np.maximum(t_compute, t_memory),
                     t_compute, t_memory, fixed)


def gemm_flops_fraction(k: Kernels, tokens: Array) -> Array:
    """Compute efficiency of a GEMM with M = ``tokens`` rows: ``e_c * M / (M + m_half)``."""
    m = np.maximum(np.asarray(tokens, dtype=float), 1e-9)
    return k.gemm_flops_fraction * m / (m + k.gemm_m_half)


def attention_bandwidth_fraction(k: Kernels, latent: bool, parallel: Array) -> Array:
    """Bandwidth efficiency of decode attention with ``parallel`` independent (sequence, KV
    head) pairs per GPU: ``e_b * P / (P + p_half)``."""
    p = np.maximum(np.asarray(parallel, dtype=float), 1e-9)
    if latent:
        return k.mla_bandwidth_fraction * p / (p + k.mla_parallel_half)
    return k.gqa_bandwidth_fraction * p / (p + k.gqa_parallel_half)
