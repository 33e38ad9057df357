"""The MoE fits of fit_kernels.py that a family of expert kernels needs of its own (a dev tool,
run through ``python scripts/fit_kernels.py DATA``; its docstring describes both curves):

- ``fit_moe_mxfp4``: the OpenAI triton MXFP4 MoE that the stacks run for gpt-oss on Hopper, its
  own call cost and bandwidth fraction (``moe_mxfp4_*``);
- ``fit_moe_fi``: FlashInfer's TRT-LLM-gen fused MoE that SGLang and vLLM run on Blackwell, its
  own three constants (``moe_fi_*``), checked on the other engine's rows of the same family.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fit_kernels import DECODE_ROWS, PEAK, Fit, _fit, _moe_compute, _rows

#: The MXFP4 MoE kernel serving stacks run for gpt-oss on Hopper, as aiconfigurator labels it: the
#: OpenAI triton_kernels MXFP4 MoE (vLLM's gpt-oss path there). Not B200: its MXFP4 rows are
#: FlashInfer's TRT-LLM MoE, a different kernel family from the triton fused MoE the moe curve is
#: fitted on, faster in every format (median log(model/measured) +0.42 bf16, +0.30 fp8, +0.48
#: nvfp4, +0.10 MXFP4 at N <= 512): a bandwidth fraction cannot absorb that (the fit runs to its
#: bound 1.0 and the held-out error grows, 0.156 -> 0.238), so B200 keeps moe_bandwidth_fraction.
MXFP4_ROWS = {
    "h100_sxm": ("vllm", "0.24.0", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"),
    "h200_sxm": ("vllm", "0.24.0", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"),
}
#: FlashInfer's TRT-LLM-gen fused MoE, which the engines run on Blackwell by default: SGLang
#: (python/sglang/srt/server_args: flashinfer_trtllm for DeepSeek fp8 / fp4 on sm100 since
#: sgl-project/sglang#11816, 2025-10; for Qwen fp8 / bf16 / fp4; flashinfer_mxfp4 for gpt-oss)
#: and vLLM (vllm/model_executor/layers/fused_moe/oracle/fp8.py: FLASHINFER_TRTLLM first in the
#: priority list outside Hopper block-fp8). (fitted table, held-out table).
FI_ROWS = {
    "b200_sxm": (("sglang", "0.5.14", lambda r: r["kernel_source"] == "sglang_flashinfer_trtllm_moe"),
                 ("vllm", "0.24.0", lambda r: "flashinfer_trtllm" in r["kernel_source"])),
}
#: Bytes a weight of each MoE table dtype takes (spectune.core.hardware.DTYPE_BYTES) and the
#: tensor-core peak (index into PEAK's bf16 / fp8; nvfp4 W4A4 at twice fp8) its FLOPs run at.
FI_DTYPES = {"bfloat16": (2.0, 1, 1.0), "fp8_block": (1.0, 2, 1.0), "fp8": (1.0, 2, 1.0),
             "nvfp4": (4.5 / 8, 2, 2.0), "w4a16_mxfp4": (4.25 / 8, 1, 1.0),
             "w4a8_mxfp4_mxfp8": (4.25 / 8, 2, 1.0)}


def fit_moe_mxfp4(data: Path, gpu: str, gemm: dict, moe: dict) -> Fit:
    bw, bf16, _ = PEAK[gpu]
    fw, ver, source = MXFP4_ROWS[gpu]
    rows = [r for r in _rows(data / gpu / "moe" / fw / ver / "moe_perf.parquet")
            if r["kernel_source"] == source and r["moe_dtype"] == "w4a16_mxfp4"
            and r["distribution"] == "balanced" and r["moe_ep_size"] == 1 and r["num_tokens"] <= 512]
    N, k, E = (np.array([r[c] for r in rows], float) for c in ("num_tokens", "topk", "num_experts"))
    P = np.array([3 * r["hidden_size"] * r["inter_size"] / r["moe_tp_size"] for r in rows], float)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    A = np.minimum(N * k, E)
    byts = A * P * 4.25 / 8  # MXFP4: 4 bits + an 8-bit scale per 32 (spectune.core.hardware)
    comp = _moe_compute(2 * N * k * P, N * k / A, bf16, gemm)  # W4A16: bf16 tensor cores

    def resid(p, m):  # p = (call us, bandwidth fraction)
        fixed = (p[0] + moe["moe_expert_us"] * A[m]) * 1e-6
        return np.log((fixed + np.maximum(comp[m], byts[m] / (p[1] * bw))) / t[m])

    fit_rows, held = E == 32, E == 128  # gpt-oss-20b shape fitted, gpt-oss-120b held out
    f = _fit(lambda p: resid(p, fit_rows), [25.0, 0.7], [0.0, 0.05], [200.0, 1.0],
             lambda p: {"moe_mxfp4_call_us": p[0], "moe_mxfp4_bandwidth_fraction": p[1]},
             N[fit_rows] <= DECODE_ROWS)
    held_err = float(np.median(np.abs(resid(f.p, held))))
    bf16_like = float(np.median(np.abs(resid([moe["moe_call_us"], moe["moe_bandwidth_fraction"]], held))))
    print(f"  # mxfp4 ({source}): fitted on {f.count} gpt-oss-20b-shape rows (median |log| {f.err:.3f}); "
          f"held out {int(held.sum())} gpt-oss-120b-shape rows: median |log| {held_err:.3f} "
          f"({bf16_like:.3f} at moe_call_us and moe_bandwidth_fraction)")
    return f


def _fi_rows(path: Path, keep, gpu: str) -> dict[str, np.ndarray]:
    """Balanced, ep 1, N <= 512 rows of one FlashInfer MoE table as arrays (dropping rows whose
    implied rate exceeds the HBM peak: weights resident in L2, as :func:`fit_moe` does)."""
    peaks = PEAK[gpu]
    rows = [r for r in _rows(path) if keep(r) and r["distribution"] == "balanced" and r["moe_ep_size"] == 1
            and r["num_tokens"] <= 512 and r["moe_dtype"] in FI_DTYPES]
    d = {c: np.array([r[c] for r in rows], float) for c in ("num_tokens", "topk", "num_experts")}
    P = np.array([3 * r["hidden_size"] * r["inter_size"] / r["moe_tp_size"] for r in rows], float)
    per = np.array([FI_DTYPES[r["moe_dtype"]][0] for r in rows])
    peak = np.array([peaks[FI_DTYPES[r["moe_dtype"]][1]] * FI_DTYPES[r["moe_dtype"]][2] for r in rows])
    t = np.array([r["latency"] for r in rows]) * 1e-3
    A = np.minimum(d["num_tokens"] * d["topk"], d["num_experts"])
    out = {"N": d["num_tokens"], "k": d["topk"], "A": A, "P": P, "byts": A * P * per, "peak": peak, "t": t}
    keep_l2 = out["byts"] / t < peaks[0]
    return {key: v[keep_l2] for key, v in out.items()}


def fit_moe_fi(data: Path, gpu: str, gemm: dict, moe: dict) -> Fit:
    bw = PEAK[gpu][0]
    (fw, ver, keep), (hw, hver, hkeep) = FI_ROWS[gpu]
    fit_d = _fi_rows(data / gpu / "moe" / fw / ver / "moe_perf.parquet", keep, gpu)
    held = _fi_rows(data / gpu / "moe" / hw / hver / "moe_perf.parquet", hkeep, gpu)

    def resid(p, d):  # p = (call us, expert us, bandwidth fraction)
        comp = _moe_compute(2 * d["N"] * d["k"] * d["P"], d["N"] * d["k"] / d["A"], d["peak"], gemm)
        return np.log(((p[0] + p[1] * d["A"]) * 1e-6 + np.maximum(comp, d["byts"] / (p[2] * bw))) / d["t"])

    f = _fit(lambda p: resid(p, fit_d), [15.0, 0.2, 0.8], [0.0, 0.0, 0.05], [200.0, 20.0, 1.0],
             lambda p: {"moe_fi_call_us": p[0], "moe_fi_expert_us": p[1], "moe_fi_bandwidth_fraction": p[2]},
             fit_d["N"] <= DECODE_ROWS)
    fused = [moe["moe_call_us"], moe["moe_expert_us"], moe["moe_bandwidth_fraction"]]
    print(f"  # moe_fi ({fw} {ver}): fitted on {f.count} rows (median |log| {f.err:.3f}); held out "
          f"{len(held['t'])} {hw} {hver} rows of the same kernel family: median |log| "
          f"{float(np.median(np.abs(resid(f.p, held)))):.3f} (at the fused-MoE constants "
          f"{float(np.median(np.abs(resid(fused, held)))):.3f})")
    return f
