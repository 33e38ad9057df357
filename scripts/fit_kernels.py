#!/usr/bin/env python3
"""Fit spectune's kernel curves to measured per-kernel timings (a dev tool, not run by users).

Reads the per-operation databases that the aiconfigurator-core package (0.12.0, Apache-2.0)
ships under ``aiconfigurator_core/systems/data/<gpu>/<op>/sglang/0.5.14/*.parquet`` and prints
the ``kernels:`` block of profiles/gpus/<gpu>.yaml. Needs pyarrow and scipy; exits quietly
when the data directory is absent.

    python scripts/fit_kernels.py /path/to/aiconfigurator_core/systems/data [h100_sxm ...]

Curves (spectune/cost/kernels.py), each fitted by least squares on log(time):
  gemm   t = c + max(2mnk / (e_c * peak * m/(m + m_half)), (nk b_w + m(k + n) b_a) / (e_b * BW))
         rows: sglang_torch_linear bf16, m <= 512, n*k >= 2^20 (decode-sized weight GEMMs)
  moe    t = c + c_e A + max(2 N k P / (e_c * peak), A P b_w / (e_b * BW)), A = min(N k, E) distinct
         experts ("balanced" routing), P = 3 h i / tp weights per expert slice
         rows: sglang_fused_moe_triton, balanced, ep 1, N <= 512, bf16 and fp8_block; rows
         whose implied bandwidth exceeds the datasheet peak (weights resident in L2) dropped
  attn   t = c + KV bytes / (e_b * BW * P / (P + p_half)), P = batch x KV heads (GQA, fa3,
         bf16 cache) or batch (MLA, flash_attention, bf16 cache, tp 1-8)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PEAK = {  # datasheet peaks (profiles/gpus/*.yaml): bytes/s, bf16 FLOP/s, fp8 FLOP/s
    "h100_sxm": (3.35e12, 989e12, 1979e12),
    "h200_sxm": (4.8e12, 989e12, 1979e12),
    "b200_sxm": (8.0e12, 2250e12, 4500e12),
}
VERSION = "0.5.14"


def _rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq
    return pq.read_table(path).to_pylist()


def _fit(fun, x0, lo, hi):
    from scipy.optimize import least_squares
    res = least_squares(fun, x0, bounds=(lo, hi))
    r = res.fun
    return res.x, float(np.median(np.abs(r))), len(r)


def fit_gemm(data: Path, gpu: str):
    bw, bf16, _ = PEAK[gpu]
    rows = [r for r in _rows(data / gpu / "gemm/sglang" / VERSION / "gemm_perf.parquet")
            if r["kernel_source"] == "sglang_torch_linear" and r["m"] <= 512
            and r["n"] * r["k"] >= 2 ** 20]
    m, n, k = (np.array([r[c] for r in rows], float) for c in "mnk")
    t = np.array([r["latency"] for r in rows]) * 1e-3
    flops, byts = 2 * m * n * k, n * k * 2 + m * (n + k) * 2

    def model(p):
        c, eb, ec, mh = p
        return c * 1e-6 + np.maximum(flops / (ec * bf16 * m / (m + mh)), byts / (eb * bw))

    p, err, cnt = _fit(lambda p: np.log(model(p) / t), [5, 0.8, 0.7, 8], [0, 0.1, 0.05, 0], [50, 1, 1, 512])
    return {"gemm_call_us": p[0], "gemm_bandwidth_fraction": p[1], "gemm_flops_fraction": p[2],
            "gemm_m_half": p[3]}, err, cnt


def fit_moe(data: Path, gpu: str):
    bw, bf16, fp8 = PEAK[gpu]
    rows = [r for r in _rows(data / gpu / "moe/sglang" / VERSION / "moe_perf.parquet")
            if r["kernel_source"] == "sglang_fused_moe_triton" and r["distribution"] == "balanced"
            and r["moe_ep_size"] == 1 and r["num_tokens"] <= 512
            and r["moe_dtype"] in ("bfloat16", "fp8_block")]
    N = np.array([r["num_tokens"] for r in rows], float)
    k = np.array([r["topk"] for r in rows], float)
    E = np.array([r["num_experts"] for r in rows], float)
    P = np.array([3 * r["hidden_size"] * r["inter_size"] / r["moe_tp_size"] for r in rows], float)
    bw_el = np.array([2.0 if r["moe_dtype"] == "bfloat16" else 1.0 for r in rows])
    peak = np.where(bw_el == 2.0, bf16, fp8)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    A = np.minimum(N * k, E)
    byts = A * P * bw_el
    keep = byts / t < bw  # an implied rate above the HBM peak means L2-resident weights
    N, k, P, peak, t, byts, A = N[keep], k[keep], P[keep], peak[keep], t[keep], byts[keep], A[keep]
    flops = 2 * N * k * P

    def model(p):
        c, ce, eb, ec = p
        return (c + ce * A) * 1e-6 + np.maximum(flops / (ec * peak), byts / (eb * bw))

    p, err, cnt = _fit(lambda p: np.log(model(p) / t), [15, 0.5, 0.8, 0.5], [0, 0, 0.1, 0.01],
                       [100, 20, 1, 1])
    # e_c is not identified at N <= 512 (never binding): spectune prices MoE compute with the
    # GEMM curve at the tokens per expert instead.
    return {"moe_call_us": p[0], "moe_expert_us": p[1], "moe_bandwidth_fraction": p[2]}, err, cnt


def _fit_attention(t, byts, par, name):
    def model(p):
        c, eb, ph = p
        return c * 1e-6 + byts / (eb * par / (par + ph))

    p, err, cnt = _fit(lambda p: np.log(model(p) / t), [10, 0.8, 8], [0, 0.05, 0], [100, 1, 4096])
    consts = {f"{name}_call_us": p[0], f"{name}_bandwidth_fraction": p[1], f"{name}_parallel_half": p[2]}
    return consts, err, cnt


def fit_gqa(data: Path, gpu: str):
    bw = PEAK[gpu][0]
    table = data / gpu / "attention/sglang" / VERSION / "generation_attention_perf.parquet"
    rows = [r for r in _rows(table)
            if r["kernel_source"] == "fa3" and r["kv_cache_dtype"] == "bfloat16"
            and r["attn_dtype"] == "bfloat16" and r["window_size"] in (0, None, -1)
            and r["isl"] + r["step"] <= 32768 and r["batch_size"] <= 256]
    if not rows:
        rows = [r for r in _rows(table)
                if r["kv_cache_dtype"] == "bfloat16" and r["isl"] + r["step"] <= 32768
                and r["batch_size"] <= 256]
    b = np.array([r["batch_size"] for r in rows], float)
    s = np.array([r["isl"] + r["step"] for r in rows], float)
    kv = np.array([r["num_key_value_heads"] for r in rows], float)
    d = np.array([r["head_dim"] for r in rows], float)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    return _fit_attention(t, b * s * 2 * kv * d * 2 / bw, b * kv, "gqa")


def fit_mla(data: Path, gpu: str):
    bw = PEAK[gpu][0]
    rows = [r for r in _rows(data / gpu / "mla/sglang" / VERSION / "generation_mla_perf.parquet")
            if r["kv_cache_dtype"] == "bfloat16" and r["tp_size"] <= 8
            and r["isl"] + r["step"] <= 32768 and r["batch_size"] <= 256]
    b = np.array([r["batch_size"] for r in rows], float)
    s = np.array([r["isl"] + r["step"] for r in rows], float)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    return _fit_attention(t, b * s * 576 * 2 / bw, b, "mla")  # DeepSeek latent 512 + rope 64


def main(argv: list[str]) -> int:
    from aic_data import data_folder

    data = data_folder(argv, __doc__)
    if isinstance(data, int):
        return data
    gpus = argv[1:] or list(PEAK)
    for gpu in gpus:
        print(f"# {gpu}: aiconfigurator-core 0.12.0 systems/data/{gpu}/*/sglang/{VERSION}")
        print("kernels:")
        print(f"  source: aiconfigurator-core 0.12.0 systems/data/{gpu} sglang {VERSION}, "
              "scripts/fit_kernels.py")
        for fit in (fit_gemm, fit_moe, fit_gqa, fit_mla):
            consts, err, cnt = fit(data, gpu)
            print(f"  # {fit.__name__[4:]}: {cnt} rows, median |log(model/measured)| {err:.3f}")
            for key, val in consts.items():
                print(f"  {key}: {max(val, 0.0):.3g}  # fit, {fit.__name__[4:]} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
