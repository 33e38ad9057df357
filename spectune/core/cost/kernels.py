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
  (the fused kernel walks one tile set per active expert); weights at ``e_b``; compute at the
  GEMM curve's efficiency for at least a full M tile of rows per expert
  (:func:`moe_flops_fraction`);
- decode attention, GQA and MLA/compressed: ``t_call`` per layer, bandwidth efficiency
  ``e_b * P / (P + p_half)`` rising with the parallel work P (sequences x KV heads per GPU for
  GQA, sequences for MLA-style latent caches, whose heads share one latent).

GPUs without measured kernels use :func:`default_kernels`: the H100 fit's fixed costs with
the GPU profile's own achievable fractions.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from spectune.core.cost.roofline import Array, Component, Work
from spectune.core.hardware import GPU, Kernels

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


def engine_kernels(k: Kernels, moe_kernel: str) -> Kernels:
    """The GPU's kernels as an engine running ``moe_kernel`` sees them: with
    ``flashinfer_trtllm`` and a fitted ``moe_fi_*`` family (Blackwell), MoE layers are priced by
    FlashInfer's TRT-LLM-gen fused MoE, in every expert format it runs (bf16, fp8, nvfp4, MXFP4:
    one curve, so the MXFP4-only constants of the Triton kernel do not apply). On B200 the two
    families differ by more than a constant: at decode sizes the fused-MoE constants price
    vLLM's TRT-LLM-gen rows 43 % slow (median |log| 0.355 on 5335 held-out rows; the
    ``moe_fi_*`` fit 0.126; aiconfigurator-core 0.12.0 moe tables, scripts/fit_kernels.py).
    Any other ``moe_kernel``, or a GPU without the family, keeps ``k``."""
    if moe_kernel != "flashinfer_trtllm" or k.moe_fi_call <= 0:
        return k
    return replace(k, moe_call=k.moe_fi_call, moe_expert=k.moe_fi_expert,
                   moe_bandwidth_fraction=k.moe_fi_bandwidth_fraction,
                   moe_mxfp4_call=0.0, moe_mxfp4_bandwidth_fraction=0.0)


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


#: Rows of the M tile a fused-MoE kernel pads each expert's tokens to at decode sizes: vLLM's
#: ``moe_align_block_size`` pads every expert's token list to a multiple of BLOCK_SIZE_M
#: (vllm-project/vllm vllm/model_executor/layers/fused_moe/moe_align_block_size.py), whose tuned
#: configs use 16-64 below 512 tokens; ROCm aiter's tuned fused-MoE tables pick block_m 32 on
#: most MI300X (cu_num 304) rows at <= 512 tokens, 16 or 64 on the rest
#: (github.com/ROCm/aiter @e404860 aiter/configs/model_configs/*_tuned_fmoe*.csv).
MOE_TILE_ROWS = 32.0


def moe_flops_fraction(k: Kernels, tokens_per_expert: Array) -> Array:
    """Compute efficiency of a grouped-GEMM MoE whose touched experts get ``tokens_per_expert``
    rows each: the GEMM curve at the rows of at least one full M tile,
    ``e_c * R / (R + m_half)`` with ``R = max(n, tile)`` (tile = :data:`MOE_TILE_ROWS`).

    Flat below a tile: an expert with 3 tokens runs one 32-row tile at that tile's efficiency,
    not at a 3-row GEMM's; the curve at n itself charged every touched expert ~m_half padded
    rows and made MI300X's MoE compute-bound at 1-2 tokens per expert (median |log(model /
    measured)| 0.30 on ROCm aiter's 47 MI300X fused-MoE rows at <= 512 tokens, never fitted;
    0.135 with the floor; ``scripts/fit_kernels.py --aiter``). Above a tile, the GEMM curve at
    n. A staircase (R = tile * ceil(n / tile)) fits those rows as well (0.122) but makes the
    cost fall by up to 42 % when one token more opens a tile (32 -> 33 per expert), so the
    floor is used: the MoE cost never falls as tokens are added."""
    n = np.maximum(np.asarray(tokens_per_expert, dtype=float), 1e-9)
    return gemm_flops_fraction(k, np.maximum(n, MOE_TILE_ROWS))


def moe_call_seconds(k: Kernels, expert_dtype: str) -> float:
    """Fixed cost of one MoE layer's kernel (seconds): ``moe_mxfp4_call`` for MXFP4 experts
    where a table measured it (the OpenAI triton MXFP4 MoE that vLLM and SGLang run for gpt-oss
    on Hopper launches its own routing, gather and scatter kernels: 32.5 us (H100) / 33.3 us
    (H200) per layer against the bf16 / fp8 fused MoE's 25.4 / 26.8 us; fitted with
    ``moe_mxfp4_bandwidth_fraction`` on aiconfigurator-core 0.12.0's vllm 0.24.0 moe tables,
    scripts/fit_kernels.py), ``moe_call`` otherwise."""
    if expert_dtype == "mxfp4" and k.moe_mxfp4_call > 0:
        return k.moe_mxfp4_call
    return k.moe_call


def moe_bandwidth_fraction(k: Kernels, expert_dtype: str) -> float:
    """Share of peak bandwidth the MoE kernel streams ``expert_dtype`` experts at: MXFP4 experts at
    ``moe_mxfp4_bandwidth_fraction`` where a table measured it (the kernel dequantises each 4-bit
    block in its inner loop: on Hopper the OpenAI triton MXFP4 MoE that vLLM runs for gpt-oss
    streams at 0.74 (H100) / 0.59 (H200) of peak where the bf16 / fp8 fused MoE streams at 0.84 /
    0.82, after its own fixed cost (:func:`moe_call_seconds`); fitted on aiconfigurator-core
    0.12.0's vllm 0.24.0 moe tables, scripts/fit_kernels.py), every other format, and MXFP4 on a GPU
    without such a table, at ``moe_bandwidth_fraction``."""
    if expert_dtype == "mxfp4" and k.moe_mxfp4_bandwidth_fraction > 0:
        return k.moe_mxfp4_bandwidth_fraction
    return k.moe_bandwidth_fraction


def attention_bandwidth_fraction(k: Kernels, latent: bool, parallel: Array) -> Array:
    """Bandwidth efficiency of decode attention with ``parallel`` independent (sequence, KV
    head) pairs per GPU: ``e_b * P / (P + p_half)``."""
    p = np.maximum(np.asarray(parallel, dtype=float), 1e-9)
    if latent:
        return k.mla_bandwidth_fraction * p / (p + k.mla_parallel_half)
    return k.gqa_bandwidth_fraction * p / (p + k.gqa_parallel_half)
