"""MoE at batch (issue 21 item 4): the grouped-GEMM curve against held-out per-kernel tables.

Data (tests/data/README.md says where each file comes from; none was fitted on):
- ``aiter_mi300x_fused_moe.csv``: ROCm aiter's tuned fused-MoE timings on MI300X (cu_num 304),
  <= 512 tokens, random routing (the tuner's ``torch.randn`` scores). MI300X has no fitted
  kernels: spectune prices it with ``default_kernels`` (H100's fixed costs, MI300X's fractions).
- ``aic_hopper_mxfp4_moe.csv``: aiconfigurator-core 0.12.0, vLLM 0.24.0, the OpenAI triton MXFP4
  MoE on H100/H200, gpt-oss-120b shape (128 experts): the held-out half of the MXFP4 fit
  (scripts/fit_kernels.py fits on the gpt-oss-20b shape).
- ``aic_b200_flashinfer_moe.csv``: aiconfigurator-core 0.12.0, vLLM 0.24.0, FlashInfer's TRT-LLM-gen
  fused MoE on B200 (what vLLM and SGLang run there): the held-out side of the ``moe_fi`` fit
  (scripts/fit_kernels.py fits SGLang's rows of the same kernel family).
- ``aic_h100_flashmla_heads.csv``: aiconfigurator-core 0.12.0 SGLang FlashMLA decode on H100 at
  16 and 64 query heads per GPU.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from spectune.core.cost import step_cost
from spectune.core.cost.kernels import (
    MOE_TILE_ROWS,
    default_kernels,
    engine_kernels,
    gemm_flops_fraction,
    kernel_price,
    moe_bandwidth_fraction,
    moe_call_seconds,
    moe_flops_fraction,
)
from spectune.core.cost.moe import moe_price, moe_work, tokens_per_expert, touched_experts
from spectune.core.cost.roofline import Work
from spectune.core.deployment import MOE_KERNELS, Parallelism
from spectune.core.hardware import dtype_bytes
from spectune.core.model import UNIFORM, MoE
from spectune.documents.profiles import load_engine, load_gpu, load_model

DATA = Path(__file__).parent / "data"


def _rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def test_moe_efficiency_is_flat_below_a_tile_and_the_gemm_curve_above() -> None:
    k = default_kernels(load_gpu("mi300x"))
    tile = MOE_TILE_ROWS
    below = moe_flops_fraction(k, np.array([0.5, 1.0, 3.0, tile]))
    assert np.all(below == pytest.approx(float(gemm_flops_fraction(k, tile))))
    n = np.array([tile + 1, 2 * tile, 200.0])
    assert moe_flops_fraction(k, n) == pytest.approx(gemm_flops_fraction(k, n))
    assert below[-1] < moe_flops_fraction(k, tile + 1)


def _moe_layer(n: float, T: float = 1.0) -> float:
    """Compute seconds of a MoE layer whose 8 experts all see ``n`` tokens (top-8 of 8)."""
    gpu = load_gpu("mi300x")
    moe = MoE(n_experts=8, top_k=8, expert_intermediate=2048)
    _, c = moe_price(moe, 7168, "fp8", "bf16", Parallelism(), np.array(n), np.array(T), UNIFORM,
                     default_kernels(gpu), gpu)
    return float(c.compute_seconds)


def test_moe_compute_time_per_token_is_flat_below_a_tile() -> None:
    """Compute seconds of a grouped GEMM grow in proportion to its tokens below a tile (every
    row runs at a full tile's efficiency), and per token they fall once past a tile."""
    per_token = [_moe_layer(n) / n for n in (1.0, 8.0, 32.0, 64.0)]
    assert per_token[0] == pytest.approx(per_token[1]) == pytest.approx(per_token[2])
    assert per_token[3] < per_token[2]


def test_moe_cost_never_falls_as_tokens_are_added() -> None:
    """A rounded-up staircase (R = tile * ceil(n / tile)) at the GEMM curve would make 33 tokens
    per expert cheaper than 32; the floor keeps the cost monotone in tokens, and in T."""
    n = np.arange(1.0, 300.0)
    t = np.array([_moe_layer(x) for x in n])
    assert np.all(np.diff(t) >= 0)
    assert _moe_layer(8.0, 4.0) >= _moe_layer(8.0, 3.0) >= _moe_layer(8.0, 1.0)


def _mi300x_prices(rows: list[dict[str, str]], tile: bool) -> tuple[np.ndarray, np.ndarray]:
    gpu = load_gpu("mi300x")
    k = default_kernels(gpu)
    pred, meas = [], []
    for r in rows:
        moe = MoE(n_experts=int(r["expert"]), top_k=int(r["topk"]), expert_intermediate=int(r["inter_dim"]))
        B, T = np.array(float(r["token"])), np.array(1.0)
        if tile:
            _, c = moe_price(moe, int(r["model_dim"]), r["weight_dtype"], "bf16", Parallelism(), B, T,
                             UNIFORM, k, gpu)
        else:  # the curve before: compute at the GEMM efficiency of the raw tokens per expert
            w = moe_work(moe, int(r["model_dim"]), r["weight_dtype"], "bf16", Parallelism(), B, T)
            touched = touched_experts(moe, Parallelism(), B, T)
            c = kernel_price(w, gpu, k.moe_call + k.moe_expert * touched, k.moe_bandwidth_fraction,
                             gemm_flops_fraction(k, tokens_per_expert(moe, Parallelism(), B, T, touched)))
        pred.append(float(c.seconds))
        meas.append(float(r["us"]) * 1e-6)
    return np.array(pred), np.array(meas)


def test_mi300x_fused_moe_rows_held_out() -> None:
    """47 aiter MI300X rows (DeepSeek-V3 EP8, GLM-5.1 TP8, Qwen3-235B TP4/TP8 shapes, 1-512
    tokens), never fitted: priced within a median 14 % (0.135 in log), mean bias +12 %; the
    curve at the raw tokens per expert charged each expert ~m_half padded rows (0.302, +30 %)."""
    rows = _rows("aiter_mi300x_fused_moe.csv")
    assert len(rows) == 47
    pred, meas = _mi300x_prices(rows, tile=True)
    err = np.log(pred / meas)
    assert np.median(np.abs(err)) < 0.15
    assert abs(np.mean(err)) < 0.13
    old, _ = _mi300x_prices(rows, tile=False)
    assert np.median(np.abs(np.log(old / meas))) > 0.25 and np.mean(np.log(old / meas)) > 0.2


def _measured(rows: list[dict[str, str]], tokens: float) -> float:
    """Log-log interpolation of a shape's measured times over its token counts."""
    n = np.array([float(r["token"]) for r in rows])
    t = np.array([float(r["us"]) for r in rows])
    o = np.argsort(n)
    return float(np.exp(np.interp(np.log(tokens), np.log(n[o]), np.log(t[o]))))


def test_deepseek_v3_moe_verify_over_plain_falls_with_batch_as_mi300x_measures() -> None:
    """The MoE's verify / plain cost ratio (T = 3 against 1) on the DeepSeek-V3 MI300X profile
    falls from batch 16 to 64 as the MI300X kernel measures for the same TP8 expert slicing
    (GLM-5.1: 256 routed + 1 fused shared expert of 256 columns, top-8 + 1): 2.06 -> 1.16
    (spectune: 1.79 -> 1.16).
    This is the decode step's reason to gain from speculation at batch: by 64 sequences the
    plain step already reads nearly every expert, so verifying 3 tokens adds little."""
    glm = [r for r in _rows("aiter_mi300x_fused_moe.csv")
           if r["file"].startswith("a8w8_blockscale_tuned_fmoe_glm5_1") and r["expert"] == "257"]
    gpu, model = load_gpu("mi300x"), load_model("deepseek-v3")
    for B, want in ((16, 2.06), (64, 1.16)):
        measured = _measured(glm, 3 * B) / _measured(glm, B)
        assert measured == pytest.approx(want, abs=0.02)
        moe = [float(step_cost(model, gpu, Parallelism(tp=8), None, B, T, 2048).components["moe"].seconds)
               for T in (1, 3)]
        assert moe[1] / moe[0] == pytest.approx(measured, rel=0.15)


def test_mxfp4_experts_held_out_rows() -> None:
    """gpt-oss-120b-shape MXFP4 MoE rows on H100 / H200 (vLLM's OpenAI triton kernel; the fit
    saw only the gpt-oss-20b shape): within a median 4 % / 6 % (0.041 / 0.059 in log), where
    the bf16 / fp8 kernel's call cost and fraction missed by 0.163 / 0.271. The kernel's own
    fixed cost matters most at decode sizes: at one token the fit prices 54 us of the 63 us
    measured on H100, the bf16 kernel's constants 51 us."""
    rows = _rows("aic_hopper_mxfp4_moe.csv")
    for gpu_key, gpu_name, bound in (("h100_sxm", "h100-sxm", 0.05), ("h200_sxm", "h200", 0.07)):
        gpu = load_gpu(gpu_name)
        k = gpu.kernels
        assert k is not None and 0 < k.moe_mxfp4_bandwidth_fraction < k.moe_bandwidth_fraction
        assert moe_call_seconds(k, "mxfp4") > k.moe_call
        mine = [r for r in rows if r["gpu"] == gpu_key]
        N, k_, E, tp = (np.array([float(r[c]) for r in mine])
                        for c in ("num_tokens", "topk", "num_experts", "moe_tp_size"))
        P = 3 * np.array([float(r["hidden_size"]) * float(r["inter_size"]) for r in mine]) / tp
        A = np.minimum(N * k_, E)  # aiconfigurator's "balanced" routing spreads picks evenly
        meas = np.array([float(r["latency_ms"]) for r in mine]) * 1e-3
        zero = np.zeros_like(N)
        w = Work(2 * N * k_ * P, A * P * dtype_bytes("mxfp4"), zero, zero, "mxfp4")
        errs = {}
        prices = (("mxfp4", moe_call_seconds(k, "mxfp4"), moe_bandwidth_fraction(k, "mxfp4")),
                  ("as bf16", k.moe_call, k.moe_bandwidth_fraction))
        for label, call, frac in prices:
            c = kernel_price(w, gpu, call + k.moe_expert * A, frac, moe_flops_fraction(k, N * k_ / A))
            errs[label] = float(np.median(np.abs(np.log(c.seconds / meas))))
        assert errs["mxfp4"] < bound
        assert errs["mxfp4"] < errs["as bf16"] - 0.02


def _b200_fi_errors() -> dict[str, float]:
    """Median |log(model / measured)| of vLLM's FlashInfer MoE rows on B200 priced with the
    kernels an engine running each family sees."""
    gpu = load_gpu("b200")
    assert gpu.kernels is not None
    rows = _rows("aic_b200_flashinfer_moe.csv")
    N, k_, E, tp = (np.array([float(r[c]) for r in rows])
                    for c in ("num_tokens", "topk", "num_experts", "moe_tp_size"))
    P = 3 * np.array([float(r["hidden_size"]) * float(r["inter_size"]) for r in rows]) / tp
    dtype = {"bfloat16": "bf16", "fp8_block": "fp8", "nvfp4": "nvfp4"}
    per = np.array([dtype_bytes(dtype[r["moe_dtype"]]) for r in rows])
    A = np.minimum(N * k_, E)
    meas = np.array([float(r["latency_ms"]) for r in rows]) * 1e-3
    zero = np.zeros_like(N)
    errs = {}
    for family in MOE_KERNELS:
        k = engine_kernels(gpu.kernels, family)
        w = Work(2 * N * k_ * P, A * P * per, zero, zero, "fp8")
        c = kernel_price(w, gpu, moe_call_seconds(k, "fp8") + k.moe_expert * A, k.moe_bandwidth_fraction,
                         moe_flops_fraction(k, N * k_ / A))
        errs[family] = float(np.median(np.abs(np.log(c.seconds / meas))))
    return errs


def test_blackwell_engines_moe_kernel_is_priced_by_its_own_fit() -> None:
    """vLLM's FlashInfer TRT-LLM-gen MoE rows on B200 (held out: the fit saw SGLang's rows of
    that family): within a median 13 % (0.126 in log fitted at every token count; 0.12 at these
    1 / 16 / 64-token rows) with the ``moe_fi_*`` constants an engine with ``moe_kernel:
    flashinfer_trtllm`` gets, where the Triton fused-MoE constants price them 40 % slow."""
    errs = _b200_fi_errors()
    assert errs["flashinfer_trtllm"] < 0.15
    assert errs["fused_moe"] > 0.3


def test_the_moe_kernel_family_is_the_engines_and_only_where_a_table_fitted_it() -> None:
    """An engine profile that says ``moe_kernel: flashinfer_trtllm`` gets B200's ``moe_fi_*``
    MoE; Hopper, with no such table, keeps its own; the shipped engines price the fused MoE
    until the per-layer work it stands in for is priced (profiles/engines/sglang.yaml)."""
    b200, h100 = load_gpu("b200").kernels, load_gpu("h100-sxm").kernels
    assert b200 is not None and h100 is not None
    fi = engine_kernels(b200, "flashinfer_trtllm")
    assert fi.moe_call == b200.moe_fi_call < b200.moe_call
    assert engine_kernels(b200, "fused_moe") == b200
    assert engine_kernels(h100, "flashinfer_trtllm") == h100  # no FlashInfer MoE table for Hopper
    shipped = ("sglang", "vllm", "trtllm", "sglang-spec-v1")
    assert {load_engine(n).moe_kernel for n in shipped} == {"fused_moe"}
    model, sglang, gpu = load_model("deepseek-r1"), load_engine("sglang"), load_gpu("b200")
    cost = {kind: float(step_cost(model, gpu, Parallelism(tp=8), replace(sglang, moe_kernel=kind),
                                  32, 1, 2048).components["moe"].seconds) for kind in MOE_KERNELS}
    assert cost["flashinfer_trtllm"] < 0.9 * cost["fused_moe"]


def test_other_formats_and_unmeasured_gpus_keep_the_moe_fraction() -> None:
    h100 = load_gpu("h100-sxm").kernels
    assert h100 is not None
    assert moe_bandwidth_fraction(h100, "fp8") == h100.moe_bandwidth_fraction
    b200 = load_gpu("b200").kernels  # its MXFP4 rows are another kernel family: not fitted
    assert b200 is not None and moe_bandwidth_fraction(b200, "mxfp4") == b200.moe_bandwidth_fraction


def test_mla_at_verify_width_on_h100_flashmla() -> None:
    """FlashMLA packs a sequence's query tokens x heads into one row block (seqlen_q * h_q per
    KV head), so verifying 4 tokens at 16 heads per GPU runs as 64 query rows. The H100 table
    at 64 against 16 heads gives what that costs: +2 % to +32 % (more at small batch and short
    context, where the kernel's fixed part dominates). spectune's attention-mla at T = 4 over
    T = 1 for DeepSeek-V3 at TP8 stays inside [1, measured]: the verify width is not a missing
    cost of a size that could turn a speedup trend (attention is 3-7 % of these steps)."""
    rows = _rows("aic_h100_flashmla_heads.csv")
    t = {(int(r["batch_size"]), int(r["kv_len"]), int(r["num_heads"])): float(r["latency_ms"]) for r in rows}
    gpu, model = load_gpu("h100-sxm"), load_model("deepseek-v3")
    for B, S in {(b, s) for b, s, _ in t}:
        measured = t[(B, S, 64)] / t[(B, S, 16)]
        assert 1.0 < measured < 1.35
        att = [float(step_cost(model, gpu, Parallelism(tp=8), None, B, T, S)
                     .components["attention-mla"].seconds) for T in (1, 4)]
        assert 1.0 <= att[1] / att[0] <= measured
