"""Accelerator specs and the roofline they define.

Units: bytes, bytes/second, FLOP/second, seconds. Peak FLOP/s are dense (no 2:4 sparsity).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

#: Bytes per element for each storage format spectune knows. Block-scaled formats count
#: their shared scales as bytes: MXFP4 is 4 bits + one 8-bit E8M0 scale per 32 values
#: (OCP Microscaling Formats spec v1.0, 2023) = 4.25 bits; NVFP4 is 4 bits + one FP8
#: scale per 16 values (NVIDIA Blackwell NVFP4 format) = 4.5 bits. fp8 block-128x128
#: scales (DeepSeek-V3 config.json weight_block_size) add 4 B per 16,384 values, ~0.02 %,
#: left out. int4 is weight-only AWQ / GPTQ with group size 128: 4 bits + an fp16 scale
#: and an fp16 zero point per 128 values (AutoAWQ / GPTQ ``group_size: 128``) = 4.25 bits.
DTYPE_BYTES: Mapping[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
    "fp4": 0.5,
    "int4": 4.25 / 8,
}

#: Which tensor-core rate a storage format computes at, and what to fall back to on a GPU
#: without it (Hopper has no FP4 units, so MXFP4 weights are dequantized to bf16 there).
_COMPUTE_CHAIN: Mapping[str, tuple[str, ...]] = {
    "fp32": ("bf16",),
    "bf16": ("bf16",),
    "fp16": ("bf16",),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "mxfp4": ("fp4", "bf16"),
    "nvfp4": ("fp4", "bf16"),
    "fp4": ("fp4", "bf16"),
    "int4": ("bf16",),  # W4A16: dequantized in the GEMM, computes at bf16
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per stored element of ``dtype`` (scales included)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class Kernels:
    """Fitted kernel constants of one GPU (seconds; fractions of datasheet peak); how they
    price a pass is in :mod:`spectune.core.cost.kernels`."""

    gemm_call: float
    gemm_bandwidth_fraction: float
    gemm_flops_fraction: float
    gemm_m_half: float
    moe_call: float
    moe_expert: float
    moe_bandwidth_fraction: float
    gqa_call: float
    gqa_bandwidth_fraction: float
    gqa_parallel_half: float
    mla_call: float
    mla_bandwidth_fraction: float
    mla_parallel_half: float
    source: str = ""
    #: Share of peak bandwidth MXFP4 (W4A16) experts stream at, dequantised in the MoE kernel;
    #: 0 = as ``moe_bandwidth_fraction`` (no MXFP4 table measured for this GPU).
    moe_mxfp4_bandwidth_fraction: float = 0.0
    #: Fixed cost of one MXFP4 MoE layer's kernel (seconds; it runs its own routing and
    #: gather / scatter launches); 0 = as ``moe_call``.
    moe_mxfp4_call: float = 0.0
    #: FlashInfer's TRT-LLM-gen fused MoE (what SGLang and vLLM run on Blackwell): fixed cost per
    #: layer and per touched expert (seconds), share of peak bandwidth; 0 = no table measured it
    #: (:func:`spectune.core.cost.kernels.engine_kernels`).
    moe_fi_call: float = 0.0
    moe_fi_expert: float = 0.0
    moe_fi_bandwidth_fraction: float = 0.0


@dataclass(frozen=True)
class Collectives:
    """Fitted collective constants of one GPU's scale-up link (seconds; fractions of
    ``GPU.link_bandwidth``); how they price a collective is in :mod:`spectune.core.cost.collectives`.

    ``link``: ``nvswitch`` / ``xgmi`` (every GPU a peer of every other: custom all-reduce at
    any TP) or ``pcie`` (custom all-reduce at TP 2 only). ``step``: one step of a custom
    all-reduce (one-shot = 1 step, two-shot = 2). ``nccl_base`` / ``nccl_hop``: NCCL ring
    all-reduce fixed time and time per hop (2(n-1) hops). ``a2a_step``: one expert-parallel
    dispatch or combine (DeepEP low-latency kernels)."""

    link: str
    step: float
    bandwidth_fraction: float
    nccl_base: float
    nccl_hop: float
    nccl_bandwidth_fraction: float
    a2a_step: float
    a2a_bandwidth_fraction: float
    source: str = ""


@dataclass(frozen=True)
class GPU:
    """One accelerator, as the roofline sees it.

    ``peak_flops`` maps a compute format (bf16, fp8, fp4, int8) to dense peak FLOP/s.
    ``bandwidth_fraction`` / ``flops_fraction`` are the achievable shares of peak that
    real kernels reach (sourced per profile); the roofline uses them unless asked for
    peak. ``link_bandwidth`` is the per-GPU, one-direction scale-up bandwidth (B/s);
    ``link_latency`` the fixed time of one small collective step (s), used where no
    ``collectives`` block is given. ``kernels``: measured
    per-kernel curves (None: :func:`spectune.core.cost.kernels.default_kernels`); ``collectives``
    measured collective constants (None: :func:`spectune.core.cost.collectives.default_collectives`).
    """

    key: str
    name: str
    memory_bytes: float
    hbm_bandwidth: float
    peak_flops: Mapping[str, float]
    link_bandwidth: float
    link_latency: float
    bandwidth_fraction: float = 1.0
    flops_fraction: float = 1.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    kernels: Kernels | None = None
    collectives: Collectives | None = None

    def compute_format(self, dtype: str) -> str:
        """The tensor-core format a ``dtype`` operand runs at on this GPU."""
        for fmt in _COMPUTE_CHAIN.get(dtype, ("bf16",)):
            if self.peak_flops.get(fmt):
                return fmt
        raise ValueError(f"{self.name} has no tensor-core rate for {dtype}")

    def flops_rate(self, dtype: str, achieved: bool = True) -> float:
        """FLOP/s for operands stored as ``dtype``."""
        peak = self.peak_flops[self.compute_format(dtype)]
        return peak * (self.flops_fraction if achieved else 1.0)

    def bandwidth(self, achieved: bool = True) -> float:
        """HBM bytes/s."""
        return self.hbm_bandwidth * (self.bandwidth_fraction if achieved else 1.0)

    def with_achieved(self, bandwidth_fraction: float | None = None,
                      flops_fraction: float | None = None) -> GPU:
        """This GPU at other achieved shares of peak (a calibration's fitted fractions).

        Measured kernel curves scale with them: each fitted kernel efficiency is multiplied
        by new / old fraction (bandwidth efficiencies by the bandwidth ratio, the GEMM's
        compute efficiency by the FLOP ratio), so the curves keep their measured shape (fixed
        costs, ``gemm_m_half``) and a calibration moves their level. Without this, a GPU
        with a ``kernels`` block never read its fractions and calibration could not move
        them."""
        bw = self.bandwidth_fraction if bandwidth_fraction is None else float(bandwidth_fraction)
        fl = self.flops_fraction if flops_fraction is None else float(flops_fraction)
        k = self.kernels
        if k is not None:
            b, f = bw / self.bandwidth_fraction, fl / self.flops_fraction
            k = replace(k, gemm_bandwidth_fraction=k.gemm_bandwidth_fraction * b,
                        gemm_flops_fraction=k.gemm_flops_fraction * f,
                        moe_bandwidth_fraction=k.moe_bandwidth_fraction * b,
                        moe_mxfp4_bandwidth_fraction=k.moe_mxfp4_bandwidth_fraction * b,
                        moe_fi_bandwidth_fraction=k.moe_fi_bandwidth_fraction * b,
                        gqa_bandwidth_fraction=k.gqa_bandwidth_fraction * b,
                        mla_bandwidth_fraction=k.mla_bandwidth_fraction * b)
        return replace(self, bandwidth_fraction=bw, flops_fraction=fl, kernels=k)

    def ridge(self, dtype: str, achieved: bool = False) -> float:
        """Ridge point in FLOP/byte: the intensity above which ``dtype`` work is compute-bound."""
        return self.flops_rate(dtype, achieved) / self.bandwidth(achieved)
