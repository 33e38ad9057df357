#!/usr/bin/env python3
"""Predicted vs measured TPOT of aggregated serving runs, held out (a dev tool).

Reads docs/aggregated-serving.yaml (published plain-serving benchmarks no constant was fitted
on, every one cited there) and prints, per row, the measured time per output token beside
spectune's aggregated step (decode plus the prefill arriving per step, spectune.core.cost.prefill)
and the decode-only step at the same context; then per ISL/OSL bucket (<1, 1-4, 4-16, >16):
n, mean predicted / measured and median |error|, for all rows, for the rows whose engine stack
an engine profile prices (stack_priced absent), and of those for the stacks no fit has seen
(same_stack_as_fit absent); then the same per category (dense at TP >= 4, MoE, ISL/OSL > 16;
the first two held to the issue's decode-step band 0.90-1.10 / 15 %). docs/validation.md
("Aggregated serving, held out") embeds this output: regenerate it with `python scripts/validate_serving.py`.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.documents.serving_validation import (  # noqa: E402
    ACCEPT_MEAN,
    ACCEPT_MEDIAN,
    ACCEPT_STEP_MEAN,
    ACCEPT_STEP_MEDIAN,
    Bucket,
    ServingPoint,
    buckets,
    categories,
    evaluate,
)


def _err(predicted: float, measured: float) -> str:
    return f"{(predicted / measured - 1) * 100:+4.0f}%"


def _line(b: Bucket, accepted: bool | None) -> str:
    if not b.n:
        return f"{b.label:11s} {0:3d}  {'-':>9s} {'-':>11s}  | {'-':>9s} {'-':>11s}  no rows"
    verdict = "-" if accepted is None else "yes" if accepted else "NO"
    return (f"{b.label:11s} {b.n:3d}  {b.mean_ratio:9.3f} {b.median_error * 100:10.0f}%  | "
            f"{b.decode_mean_ratio:9.3f} {b.decode_median_error * 100:10.0f}%  {verdict}")


def _summary(title: str, points: list[ServingPoint]) -> None:
    print(f"-- {title} (aggregated step | decode-only step)")
    print(f"{'ISL/OSL':11s} {'n':>3s}  {'pred/meas':>9s} {'median|err|':>11s}  | {'pred/meas':>9s} "
          f"{'median|err|':>11s}  accepted")
    for b in buckets(points):
        print(_line(b, b.accepted))
    for b in categories(points):
        step = b.label != "ISL/OSL>16"  # the decode-step band is for TP >= 4 and MoE
        print(_line(b, b.within(ACCEPT_STEP_MEAN, ACCEPT_STEP_MEDIAN) if step else b.accepted))


def main() -> None:
    rows = yaml.safe_load((ROOT / "docs" / "aggregated-serving.yaml").read_text(encoding="utf-8")) or []
    points = evaluate(rows)
    print(f"{'source':38s} {'gpu':8s} {'model':12s} {'engine':19s} {'tp':>2s} {'ISL':>5s} {'OSL':>5s} "
          f"{'conc':>4s} {'meas':>6s} {'pred':>6s} {'err':>5s} {'decode':>6s} {'err':>5s}")
    for p in sorted(points, key=lambda p: (p.ratio, p.row["source"], p.row["tp"], p.row["concurrency"])):
        r = p.row
        mark = "*" if r.get("same_stack_as_fit") else "!" if not r.get("stack_priced", True) else " "
        print(f"{r['source'][:37] + mark:38s} {r['gpu'][:8]:8s} {r['model'][:12]:12s} {r['engine'][:19]:19s} "
              f"{r['tp']:>2} {r['input_len']:>5} {r['output_len']:>5} {r['concurrency']:>4} "
              f"{p.measured * 1e3:6.1f} {p.predicted * 1e3:6.1f} {_err(p.predicted, p.measured)} "
              f"{p.decode_only * 1e3:6.1f} {_err(p.decode_only, p.measured)}")
    print("(TPOT in ms; * same stack and sweep as the rows an engine's terms were fitted on: "
          "held-out lengths only;\n ! a stack no engine profile prices, stack_priced: false)")
    print()
    priced = [p for p in points if p.row.get("stack_priced", True)]
    _summary("all rows", points)
    _summary("rows whose stack an engine profile prices (not stack_priced: false)", priced)
    _summary("of those, stacks no fit has seen (not same_stack_as_fit)",
             [p for p in priced if not p.row.get("same_stack_as_fit")])
    print(f"accepted: mean predicted / measured in [{ACCEPT_MEAN[0]}, {ACCEPT_MEAN[1]}] and median |error| "
          f"<= {ACCEPT_MEDIAN:.0%} (issue 21; TP>=4 dense and MoE: [{ACCEPT_STEP_MEAN[0]}, "
          f"{ACCEPT_STEP_MEAN[1]}] and <= {ACCEPT_STEP_MEDIAN:.0%})")


if __name__ == "__main__":
    # `... | head` ends the table quietly (the default SIGPIPE action), not with a traceback
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
