"""What-if, not a fit: price vLLM's async scheduling on the held-out aggregated-serving rows.

vLLM runs async scheduling by default from 0.14.0 (release notes; vllm-project/vllm#27614,
#31998): a step's host work overlaps the device's previous step. If the fixed per-pass term
``pass_overhead_us`` of profiles/engines/vllm.yaml (0.528 ms: 0.72 ms measured in mid-2025
without async scheduling, less the small kernels priced apart since session 38) were all host
work H, a step would expose only max(0, H - device time) of it. This prints every held-out row
of docs/aggregated-serving.yaml run on vLLM >= 0.14 (the InferenceX gpt-oss-120b sweep, vLLM
0.15.1 with --async-scheduling) priced as shipped and with that overlap, then the per-bucket
summaries of scripts/validate_serving.py both ways. Nothing is fitted and nothing ships from it:
the overlap makes every bucket worse (docs/validation.md, "Async scheduling").

    python scripts/vllm_async_whatif.py
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from spectune.core.speedup import speedup_grid
from spectune.documents import serving_validation as sv

ROWS = Path(__file__).resolve().parents[1] / "docs" / "aggregated-serving.yaml"
ASYNC_SINCE = (0, 14)  # profiles/engines/vllm.yaml overlap_scheduling.since


def runs_async(row: dict[str, Any]) -> bool:
    """A vLLM row whose release (its engine_version) has async scheduling on by default."""
    m = re.search(r"(\d+)\.(\d+)", str(row.get("engine_version", "")))
    return row["engine"] == "vllm" and m is not None and (int(m[1]), int(m[2])) >= ASYNC_SINCE


def overlapped(row: dict[str, Any]) -> sv.ServingPoint:
    """The row priced with the per-pass term exposed only by max(0, H - device step)."""
    dep = sv.deployment(row)
    host = dep.engine.pass_overhead
    bare = replace(dep, engine=replace(dep.engine, pass_overhead=0.0))
    agg = float(speedup_grid(bare).c0[0, 0])
    dec = float(speedup_grid(replace(bare, workload=replace(bare.workload, lengths=()))).c0[0, 0])
    return sv.ServingPoint(row, agg + max(0.0, host - agg), dec + max(0.0, host - dec),
                           float(row["tpot_ms"]) * 1e-3)


def main() -> None:
    rows = [r for r in yaml.safe_load(ROWS.read_text(encoding="utf-8")) or [] if isinstance(r, dict)]
    shipped = [sv.predict(r) for r in rows]
    whatif = [overlapped(r) if runs_async(r) else p for r, p in zip(rows, shipped, strict=True)]
    print(f"{'tp':>2s} {'ISL':>5s} {'OSL':>5s} {'conc':>4s} {'meas':>6s} {'shipped':>12s} "
          f"{'overlapped':>12s}")
    for p, q in zip(shipped, whatif, strict=True):
        if not runs_async(dict(p.row)):
            continue
        r = p.row
        print(f"{r['tp']:>2} {r['input_len']:>5} {r['output_len']:>5} {r['concurrency']:>4} "
              f"{p.measured * 1e3:6.2f} {p.predicted * 1e3:6.2f} {p.predicted / p.measured - 1:+5.0%} "
              f"{q.predicted * 1e3:6.2f} {q.predicted / q.measured - 1:+5.0%}")
    for name, pts in (("shipped", shipped), ("overlapped", whatif)):
        unseen = [p for p in pts if "stack_priced" not in p.row and not p.row.get("same_stack_as_fit")]
        print(f"{name:10s} stacks no fit has seen: " + " | ".join(
            f"{b.label} n={b.n} mean {b.mean_ratio:.3f} median |err| {b.median_error:.0%}"
            for b in sv.buckets(unseen) if b.n))


if __name__ == "__main__":
    main()
