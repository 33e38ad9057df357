#!/usr/bin/env python3
"""TensorRT-LLM's kernels against SGLang's, per GPU (a dev tool, not run by users; issue 23 item 1).

Fits spectune's kernel curves (scripts/fit_kernels.py, the same code and row filters) to
aiconfigurator-core 0.12.0's per-operation tables of the trtllm backend (1.3.0rc20: GEMM, MoE,
GQA and MLA decode attention) and of sglang 0.5.14, and prints per GPU and family:

* the constants of each fit side by side;
* the median |log(model/measured)| of the trtllm rows priced with their own constants and with
  SGLang's (the shipped profiles/gpus ``kernels:``), on every row and on the decode-shaped rows
  (M, MoE tokens or batch <= 64), with the median log (the bias) of the latter;
* the median trtllm/sglang ratio of the measured times at the shapes both tables hold (MoE also
  by the width of each GPU's expert slice, inter_size / moe_tp_size);
* SGLang's constants on SGLang's own decode rows (the curve's bias, for reference).

    python scripts/fit_trtllm_kernels.py /path/to/aiconfigurator_core/systems/data [h100_sxm ...]
    python scripts/fit_trtllm_kernels.py --extract /path/to/.../systems/data tests/data/aic_trtllm_decode.csv
    python scripts/fit_trtllm_kernels.py --extract DATA tests/data/aic_a100_sglang_decode.csv a100_sxm

Needs pyarrow and scipy; exits quietly when the data directory is absent. Never reads
aiconfigurator's silicon_sample.csv (end-to-end serving runs, held out).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import csv

from aic_data import data_folder, parquet_rows
from fit_kernels import DECODE_ROWS, ENGINE_ROWS, fit_all, fitted_gpus, rows_of

#: family -> (op folder, table, shape key columns, dtype column or None, decode-size column)
TABLES = {
    "gemm": ("gemm", "gemm_perf", ("m", "n", "k"), "gemm_dtype", "m"),
    "moe": ("moe", "moe_perf", ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                                "moe_tp_size"), "moe_dtype", "num_tokens"),
    "gqa": ("attention", "generation_attention_perf",
            ("batch_size", "step", "num_heads", "num_key_value_heads", "head_dim"), None, "batch_size"),
    "mla": ("mla", "generation_mla_perf", ("batch_size", "step", "num_heads", "tp_size"), None, "batch_size"),
}


def _measured(data: Path, gpu: str, engine: str, family: str) -> dict:
    """Decode-shaped rows of one engine's table (bf16 weights / cache, balanced ep1 MoE, no
    window), latency in ms by (dtype, shape)."""
    op, name, key, dtype, size = TABLES[family]
    version, keep = ENGINE_ROWS[engine][family]
    out = {}
    for r in parquet_rows(data / gpu / op / engine / version / f"{name}.parquet"):
        if not keep(r) or r[size] > DECODE_ROWS or r.get("kv_cache_dtype", "bfloat16") != "bfloat16":
            continue
        if family == "moe" and (r["distribution"] != "balanced" or r["moe_ep_size"] != 1):
            continue
        if r.get("window_size") not in (None, 0, -1):
            continue
        out[(r[dtype] if dtype else "bf16", *(r[c] for c in key))] = r["latency"]
    return out


def compare(data: Path, gpu: str) -> list[str]:
    """The comparison lines for one GPU."""
    sgl, trt = fit_all(data, gpu, "sglang"), fit_all(data, gpu, "trtllm")
    versions = {engine: rows["gemm"][0] for engine, rows in ENGINE_ROWS.items()}
    lines = [f"# {gpu}: trtllm {versions['trtllm']} against sglang {versions['sglang']}"]
    for fam in TABLES:
        s, t = sgl[fam], trt[fam]
        own, cross = np.abs(t.resid(t.p)), t.resid(s.p)
        d = t.decode
        lines.append(f"  {fam}: {t.count} trtllm rows ({int(d.sum())} decode-shaped); median |log| own fit "
                     f"{np.median(own):.3f} (decode {np.median(own[d]):.3f}), at sglang constants "
                     f"{np.median(np.abs(cross)):.3f} (decode {np.median(np.abs(cross[d])):.3f}, "
                     f"median log {np.median(cross[d]):+.3f})")
        for key, val in t.consts.items():
            lines.append(f"    {key:28s} sglang {max(s.consts[key], 0.0):8.3g}   trtllm {max(val, 0.0):8.3g}")
        a, b = _measured(data, gpu, "trtllm", fam), _measured(data, gpu, "sglang", fam)
        by_dtype: dict[str, list[float]] = {}
        for k in set(a) & set(b):
            by_dtype.setdefault(k[0], []).append(a[k] / b[k])
        for k in set(a) & set(b):
            if fam == "moe":  # by the expert slice each GPU holds: inter_size / moe_tp_size
                width = k[3] // k[6]
                band = "<= 256" if width <= 256 else ("257-1024" if width <= 1024 else "> 1024")
                by_dtype.setdefault(f"{k[0]} slice {band}", []).append(a[k] / b[k])
        for dt, ratios in sorted(by_dtype.items()):
            r = np.array(ratios)
            lines.append(f"    measured trtllm/sglang, {dt}, same shapes <= {DECODE_ROWS}: "
                         f"median {np.median(r):.3f} (p25 {np.percentile(r, 25):.3f}, "
                         f"p75 {np.percentile(r, 75):.3f}, {len(r)} shapes)")
        own_sgl = s.resid(s.p)[s.decode]
        lines.append(f"    sglang rows at sglang constants, decode: median |log| "
                     f"{np.median(np.abs(own_sgl)):.3f}, median log {np.median(own_sgl):+.3f}")
    return lines


#: The rows tests/test_trtllm_kernels.py prices: decode shapes of both engines' tables on H100 and
#: B200, a few model shapes per family (Llama-3.1-8B / 70B TP8 GEMMs and attention, DeepSeek-V3
#: TP1 and TP8 fp8_block MoE and MLA, Qwen3-30B-A3B and Mixtral-8x7B bf16 MoE).
MOE_SHAPE = ("moe_dtype", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size")
EXTRACT = {
    "gemm": lambda r: r["gemm_dtype"] == "bfloat16" and r["m"] in (1, 2, 4, 8, 16, 32, 64)
    and (r["n"], r["k"]) in {(6144, 4096), (4096, 4096), (1024, 8192), (8192, 1024), (7168, 8192),
                             (8192, 3584)},
    "moe": lambda r: r["distribution"] == "balanced" and r["moe_ep_size"] == 1 and (
        tuple(r[c] for c in MOE_SHAPE) in {
            ("fp8_block", 7168, 2048, 256, 8, 1), ("fp8_block", 7168, 2048, 256, 8, 8),
            ("bfloat16", 2048, 768, 128, 8, 1), ("bfloat16", 4096, 14336, 8, 2, 1),
            ("bfloat16", 4096, 14336, 8, 2, 8)}),
    "gqa": lambda r: r.get("window_size") in (None, 0, -1) and r["step"] in (1023, 4095, 16383)
    and r["batch_size"] in (1, 4, 16, 64) and (r["num_heads"], r["num_key_value_heads"], r["head_dim"]) in {
        (32, 8, 128), (8, 1, 128), (64, 8, 128)},
    "mla": lambda r: r["step"] in (1023, 4095, 16383) and r["batch_size"] in (1, 4, 16, 64)
    and r["tp_size"] in (1, 8),
}
COLUMNS = ("gpu", "engine", "family", "dtype", "m", "n", "k", "num_tokens", "hidden_size", "inter_size",
           "num_experts", "topk", "moe_tp_size", "batch_size", "ctx", "num_heads", "num_key_value_heads",
           "head_dim", "tp_size", "latency_ms")


def extract(data: Path, out: Path, gpus: tuple[str, ...] = ("h100_sxm", "b200_sxm")) -> int:
    """Write the rows of :data:`EXTRACT` (every engine with a table on the GPU, the fit's own
    filters) to ``out``."""
    rows = []
    for gpu in gpus:
        for engine in ENGINE_ROWS:
            for fam, (op, name, _key, dtype, size) in TABLES.items():
                spec = rows_of(gpu, engine, fam)
                path = data / gpu / op / engine / (spec[0] if spec else "") / f"{name}.parquet"
                if spec is None or not path.is_file():
                    continue
                keep = spec[1]
                for r in parquet_rows(path):
                    bf16_cache = r.get("kv_cache_dtype", "bfloat16") == "bfloat16"
                    if keep(r) and r[size] <= DECODE_ROWS and bf16_cache and EXTRACT[fam](r):
                        rows.append({**{c: r.get(c, "") for c in COLUMNS}, "gpu": gpu, "engine": engine,
                                     "family": fam, "dtype": r[dtype] if dtype else "bfloat16",
                                     "ctx": r["isl"] + r["step"] if "step" in r else "",
                                     "latency_ms": f"{r['latency']:.6g}"})
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(sorted(rows, key=lambda r: tuple(str(r[c]) for c in COLUMNS[:4])))
    print(f"{len(rows)} rows -> {out}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--extract"]:
        found = data_folder(argv[1:2], __doc__)
        if isinstance(found, int):
            return found
        gpus = tuple(argv[3:]) or ("h100_sxm", "b200_sxm")
        return extract(found, Path(argv[2]) if len(argv) > 2 else Path("aic_trtllm_decode.csv"), gpus)
    data = data_folder(argv, __doc__)
    if isinstance(data, int):
        return data
    for gpu in argv[1:] or [g for g in fitted_gpus(data, "sglang") if g in fitted_gpus(data, "trtllm")]:
        print("\n".join(compare(data, gpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
