#!/usr/bin/env python3
"""Predicted vs published speedups (prints figures; not a test, never a fit).

Reads docs/published-speedups.yaml: measured speculative-decoding speedups that others
published, each with the deployment it was measured on, and prints spectune's prediction
beside each, with the ratio predicted / measured. Constants are never tuned to these rows;
the point is to show, honestly, where the model is close and where it is not.

Row format:
  - source: "EAGLE-3 paper (arXiv 2503.01840), Table 4"
    engine: sglang          # vllm | sglang
    gpu: h100-sxm
    model: llama-3.1-8b
    drafter: eagle3-llama-3.1-8b   # built-in drafter, or ngram
    tp: 1                   # optional: ep, dp
    batch: 2
    context: 1024           # typical context of the benchmark (prompt + half the output)
    gamma: 5                # draft tokens per step as configured
    mean_length: 3.6        # measured mean acceptance length (tokens per step), or alpha:
    measured: 1.81          # measured throughput speedup over no speculation
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.acceptance import Acceptance  # noqa: E402
from spectune.deployment import Deployment, Parallelism, Workload  # noqa: E402
from spectune.profiles import load_drafter, load_engine, load_gpu, load_model  # noqa: E402
from spectune.speedup import speedup_grid  # noqa: E402


def predict(row: dict) -> float:
    gamma = int(row["gamma"])
    if "mean_length" in row:
        acc = Acceptance.from_mean_length(min(float(row["mean_length"]), gamma + 1), gamma)
    else:
        acc = Acceptance.iid(float(row["alpha"]))
    dep = Deployment(
        name="validate", gpu=load_gpu(row["gpu"]), model=load_model(row["model"]),
        drafter=load_drafter(row["drafter"]),
        parallelism=Parallelism(row.get("tp", 1), row.get("ep", 1), row.get("dp", 1)),
        engine=load_engine(row.get("engine", "vllm")),
        workload=Workload((int(row["batch"]),), (int(row.get("context", 1024)),)),
        acceptance=acc, gamma_max=gamma)
    return float(speedup_grid(dep).speedup[0, 0, gamma])


def main() -> None:
    rows = yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text()) or []
    ratios: dict[bool, list[float]] = {True: [], False: []}
    print(f"{'source':44s} {'model':22s} {'B':>4s} {'g':>2s} {'meas':>5s} {'pred':>5s} {'p/m':>5s}")
    for row in rows:
        try:
            pred = predict(row)
        except Exception as exc:  # a row naming a profile we do not ship
            print(f"{row.get('source', '?')[:44]:44s} skipped: {exc}")
            continue
        ratio = pred / float(row["measured"])
        fit = bool(row.get("fit"))
        ratios[fit].append(ratio)
        print(f"{row['source'][:44]:44s} {row['model'][:22]:22s} {row['batch']:>4} {row['gamma']:>2} "
              f"{row['measured']:5.2f} {pred:5.2f} {ratio:5.2f}{'  (fit)' if fit else ''}")
    for fit, label in ((True, "rows the constants were derived from"), (False, "held-out rows")):
        r = np.array(ratios[fit])
        if r.size:
            print(f"{label}: {len(r)}; predicted/measured median {np.median(r):.2f}, "
                  f"geometric mean {np.exp(np.mean(np.log(r))):.2f}, "
                  f"within +-20%: {np.mean(np.abs(r - 1) <= 0.2) * 100:.0f}%")


if __name__ == "__main__":
    main()
