#!/usr/bin/env python3
"""Fit spectune's collective constants to measured per-operation timings (a dev tool, not run by users).

Reads the communication tables that the aiconfigurator-core package (0.12.0, Apache-2.0) ships
under ``aiconfigurator_core/systems/data/<gpu>/comm/`` and prints the ``collectives:`` block of
profiles/gpus/<profile>.yaml. Needs pyarrow and scipy; exits quietly when the data directory is
absent.

    python scripts/fit_comm.py /path/to/aiconfigurator_core/systems/data [h100_sxm ...]

Rows (``message_size`` is an element count, bf16 = 2 bytes: aiconfigurator ``collector/
collect_all_reduce.py`` builds a [tokens, 4096] tensor of that many elements, ``collect_nccl.py``
logs ``size // bytes_per_element``; ``latency`` in ms):
  engines  ``comm/{vllm,sglang}/<newest>/custom_allreduce_perf.parquet``, CUDA-graph rows
           (``*_graph``), 2-8 GPUs: what ``tensor_model_parallel_all_reduce`` of each engine ran
  nccl     ``comm/nccl/<newest>/nccl_perf.parquet``, ``all_reduce`` rows (nccl-tests all_reduce_perf)
  a2a      ``comm/sglang/<newest>/wideep_deepep_ll_perf.parquet`` (DeepEP low-latency, 8 GPUs, one
           node): dispatch (FP8 + one fp32 scale per 128) and combine (bf16) per token count
  gather   ``comm/nccl/<newest>/nccl_perf.parquet``, ``all_gather`` and ``reduce_scatter`` rows
           (``message_size`` = the gathered tensor's elements: nccl-tests' size): not fitted,
           priced with the all-reduce's NCCL constants as a check (every row held out)
Sizes up to 64 MiB. Every row is priced by spectune.core.cost.collectives (the same code the cost model
runs: algorithm by size and TP, then its formula) and the constants are fitted by least squares on
log(time). Held out: every 4-GPU row (the fit sees 2 and 8 GPUs only); the script prints the
median |log(model/measured)| on fit and held-out rows and the decode row the tests check
(65,536 elements = 8 tokens x 8192 hidden, bf16, at 8 GPUs).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aic_data import data_folder, parquet_rows  # noqa: E402

from spectune.core.cost.collectives import allreduce_seconds, alltoall_parts, gather_parts  # noqa: E402
from spectune.core.hardware import Collectives  # noqa: E402
from spectune.documents.profiles import load_gpu  # noqa: E402

#: aiconfigurator system -> (spectune GPU profile, link kind)
SYSTEMS = {
    "h100_sxm": ("h100-sxm", "nvswitch"),
    "h200_sxm": ("h200", "nvswitch"),
    "b200_sxm": ("b200", "nvswitch"),
    "b300_sxm": ("b300", "nvswitch"),
    "gb200": ("gb200", "nvswitch"),
    "gb300": ("gb300", "nvswitch"),
    "a100_sxm": ("a100-80gb", "nvswitch"),
    "l40s": ("l40s", "pcie"),
    "rtx_pro_6000_server": ("rtx-5090", "pcie"),  # same GB202 die on PCIe 5.0 (INFERRED for rtx-5090)
}
MAX_BYTES = 64 * 2 ** 20
HELD_OUT_TP = 4
DECODE_ELEMENTS = 8 * 8192


def _newest(folder: Path, name: str) -> Path | None:
    def key(p: Path) -> tuple:
        version = p.parent.name.replace("rc", ".").replace("post", ".")
        return tuple(int(x) if x.isdigit() else -1 for x in version.split("."))
    found = sorted(folder.glob(f"*/{name}"), key=key)
    return found[-1] if found else None


def allreduceparquet_rows(data: Path, system: str) -> list[tuple[str, int, float, float]]:
    """(source, GPUs, bytes, seconds) of every all-reduce row used."""
    out = []
    comm = data / system / "comm"
    for engine in ("vllm", "sglang"):
        path = _newest(comm / engine, "custom_allreduce_perf.parquet")
        for r in parquet_rows(path):
            if (r["kernel_source"].endswith("_graph") and 2 <= r["num_gpus"] <= 8
                    and r["allreduce_dtype"] == "bfloat16"):
                out.append((f"{engine} {path.parent.name}", r["num_gpus"], 2.0 * r["message_size"],
                            r["latency"] * 1e-3))
    # PCIe: the engines' rows at 4 and 8 GPUs are NCCL runs inside CUDA graphs (what serving
    # pays); nccl-tests' out-of-graph times there are 1.5x those, so they are left out.
    path = _newest(comm / "nccl", "nccl_perf.parquet") if SYSTEMS[system][1] != "pcie" else None
    for r in parquet_rows(path):
        if r["op_name"] == "all_reduce" and r["num_gpus"] <= 8 and r["nccl_dtype"] == "half":
            out.append((f"nccl {path.parent.name}", r["num_gpus"], 2.0 * r["message_size"],
                        r["latency"] * 1e-3))
    return [row for row in out if row[2] <= MAX_BYTES]


def a2aparquet_rows(data: Path, system: str) -> list[tuple[float, float]]:
    """(bytes of picks per GPU, seconds) of DeepEP low-latency dispatch and combine, 8 GPUs."""
    out = []
    for r in parquet_rows(_newest(data / system / "comm" / "sglang", "wideep_deepep_ll_perf.parquet")):
        if r["node_num"] != 1:
            continue
        picks = r["num_token"] * r["num_topk"] * r["hidden_size"]
        out.append((picks * (1 + 4 / 128), r["dispatch_avg_t_us"] * 1e-6))
        out.append((picks * 2.0, r["combine_avg_t_us"] * 1e-6))
    return out


def gatherparquet_rows(data: Path, system: str) -> list[tuple[str, int, float, float]]:
    """(op, GPUs, bytes gathered in all, seconds) of nccl-tests all_gather / reduce_scatter rows."""
    comm = data / system / "comm"
    path = _newest(comm / "nccl", "nccl_perf.parquet") if SYSTEMS[system][1] != "pcie" else None
    return [(r["op_name"], r["num_gpus"], 2.0 * r["message_size"], r["latency"] * 1e-3)
            for r in parquet_rows(path)
            if r["op_name"] in ("all_gather", "reduce_scatter") and r["num_gpus"] <= 8
            and r["nccl_dtype"] == "half" and 2.0 * r["message_size"] <= MAX_BYTES]


def gather_check(gpu, rows) -> dict[str, float]:
    """Median |log(model/measured)| of the gather rows per op and GPU count, and at decode
    sizes (<= 1 MiB gathered: 64 tokens x 7168 hidden x 2 bytes is 0.9 MiB)."""
    out = {}
    for op in ("all_gather", "reduce_scatter"):
        for n in sorted({r[1] for r in rows}):
            sel = [r for r in rows if r[0] == op and r[1] == n]
            m = np.array([r[2] for r in sel])
            t = np.array([r[3] for r in sel])
            lat, wire, _ = gather_parts(gpu, n, m)
            err = np.log((lat + wire) / t)
            small = m <= 2 ** 20
            out[f"{op} {n}"] = float(np.median(np.abs(err)))
            out[f"{op} {n} decode"] = float(np.median(err[small]))
    return out


def _lsq(fun, x0, lo, hi):
    from scipy.optimize import least_squares
    return least_squares(fun, x0, bounds=(lo, hi)).x


def fit(data: Path, system: str):
    profile, link = SYSTEMS[system]
    gpu = load_gpu(profile)
    rows = allreduceparquet_rows(data, system)
    if not rows:
        return None
    n = np.array([r[1] for r in rows])
    m = np.array([r[2] for r in rows])
    t = np.array([r[3] for r in rows])
    nccl = np.array([r[0].startswith("nccl") for r in rows])
    fit_rows = n != HELD_OUT_TP

    def with_(x) -> object:
        c = Collectives(link, x[0] * 1e-6, x[1], x[2] * 1e-6, x[3] * 1e-6, x[4], 0.0, 1.0)
        return dataclasses.replace(gpu, collectives=c)

    def price(x):
        """Every row priced: engine rows by the engines' algorithm, nccl-tests rows as NCCL."""
        g = with_(x)
        out = np.empty_like(t)
        for k in np.unique(n):
            sel = n == k
            out[sel] = np.where(nccl[sel], allreduce_seconds(g, int(k), m[sel], "nccl"),
                                allreduce_seconds(g, int(k), m[sel]))
        return out

    def resid(x):
        return np.log(price(x)[fit_rows] / t[fit_rows])

    x = _lsq(resid, [5, 0.6, 5, 1, 0.5], [0.1, 0.01, 0.1, 0.0, 0.005], [100, 1, 200, 50, 1])
    err_fit = float(np.median(np.abs(resid(x))))
    held = n == HELD_OUT_TP
    err_held = float(np.median(np.abs(np.log(price(x)[held] / t[held])))) if held.any() else float("nan")
    a2a = a2aparquet_rows(data, system)
    if a2a:
        ab = np.array([r[0] for r in a2a])
        at = np.array([r[1] for r in a2a])

        def resid_a2a(y):
            c = Collectives(link, 0, 1, 0, 0, 1, y[0] * 1e-6, y[1])
            lat, wire, _ = alltoall_parts(dataclasses.replace(gpu, collectives=c), 8, ab)
            return np.log((lat + wire) / at)

        y = _lsq(resid_a2a, [10, 0.5], [0.1, 0.01], [200, 1])
        err_a2a = float(np.median(np.abs(resid_a2a(y))))
    else:
        y, err_a2a = np.array([x[0], x[1]]), float("nan")
    decode = [(r[0], r[3]) for r in rows if r[1] == 8 and r[2] == 2.0 * DECODE_ELEMENTS]
    g = with_(x)
    decode_err = [(src, float(allreduce_seconds(g, 8, 2.0 * DECODE_ELEMENTS,
                                                "nccl" if src.startswith("nccl") else None)) / s - 1)
                  for src, s in decode]
    sources = sorted({r[0] for r in rows})
    gathers = gatherparquet_rows(data, system)
    return {"gather": gather_check(g, gathers) if gathers else {}, "n_gather": len(gathers),
            "profile": profile, "link": link, "x": x, "y": y, "n_fit": int(fit_rows.sum()),
            "n_held": int(held.sum()), "err_fit": err_fit, "err_held": err_held, "n_a2a": len(a2a),
            "err_a2a": err_a2a, "decode": decode_err, "sources": sources}


def main(argv: list[str]) -> int:
    data = data_folder(argv, __doc__)
    if isinstance(data, int):
        return data
    for system in argv[1:] or list(SYSTEMS):
        f = fit(data, system)
        if f is None:
            print(f"# {system}: no communication tables", file=sys.stderr)
            continue
        x, y = f["x"], f["y"]
        print(f"# {system} -> profiles/gpus/{f['profile']}.yaml: {', '.join(f['sources'])}")
        print(f"# all-reduce: {f['n_fit']} fit rows (2 and 8 GPUs) median |log(model/measured)| "
              f"{f['err_fit']:.3f}; {f['n_held']} held-out 4-GPU rows {f['err_held']:.3f}")
        print("# decode row (65,536 bf16 elements, 8 GPUs): "
              + ", ".join(f"{s} {e:+.0%}" for s, e in f["decode"]))
        print(f"# a2a: {f['n_a2a']} DeepEP LL rows, median |log(model/measured)| {f['err_a2a']:.3f}"
              if f["n_a2a"] else "# a2a: no DeepEP tables; the all-reduce step and fraction stand in")
        if f["n_gather"]:
            g = f["gather"]
            print(f"# all-gather / reduce-scatter: {f['n_gather']} nccl-tests rows, none fitted, priced with "
                  "the NCCL all-reduce constants; median |log(model/measured)| "
                  + ", ".join(f"{k} {v:.3f}" for k, v in g.items() if not k.endswith("decode"))
                  + "; median signed log error at <= 1 MiB: "
                  + ", ".join(f"{k[:-7]} {v:+.3f}" for k, v in g.items() if k.endswith("decode")))
        print("collectives:")
        print(f"  link: {f['link']}")
        rows = "DeepEP LL rows" if f["n_a2a"] else "no DeepEP table: the all-reduce value stands in"
        for key, val, why in (("step_us", x[0], "custom all-reduce rows"),
                              ("bandwidth_fraction", x[1], "custom all-reduce rows"),
                              ("nccl_base_us", x[2], "NCCL rows"), ("nccl_hop_us", x[3], "NCCL rows"),
                              ("nccl_bandwidth_fraction", x[4], "NCCL rows"),
                              ("a2a_step_us", y[0], rows), ("a2a_bandwidth_fraction", y[1], rows)):
            print(f"  {key}: {val:.3g}  # {'fit, ' if why != rows or f['n_a2a'] else ''}{why}")
        print(f"  source: aiconfigurator-core 0.12.0 systems/data/{system}/comm, scripts/fit_comm.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
