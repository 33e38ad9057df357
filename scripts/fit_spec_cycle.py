#!/usr/bin/env python3
"""Fit an engine's speculative-cycle terms to its published speedups (a dev tool).

Reads the ``use: fit`` rows of docs/published-speedups.yaml for one engine profile and fits,
by least squares on log(speedup) with every other term fixed:

- ``spec_cycle_overhead_us``: engine seconds per speculative cycle over a plain step;
- with ``--token-cost``, jointly ``verify_token_cost_us``: seconds per token whose logits a
  speculative pass processes (SGLang's v0.4.4 rows, batch 2-64, separate the two; vLLM's
  batch-1 rows cannot).

``--source TEXT`` keeps the rows whose ``source`` starts with TEXT (vLLM's EAGLE-3 points of
#20780 set the cycle term; its EAGLE-1 points set ``draft_pass_overhead_by_kind_us``, derived by
hand in profiles/engines/vllm.yaml). Prints the values and each row's residual.

    python scripts/fit_spec_cycle.py sglang-spec-v1 --token-cost
    python scripts/fit_spec_cycle.py vllm --source "vllm issue #20780 [G1]"
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.documents import validation as pv  # noqa: E402


def fit(engine_name: str, source: str, token_cost: bool) -> tuple[np.ndarray, list[tuple[dict, float]]]:
    """(fitted values in microseconds, [(row, predicted speedup)])."""
    from scipy.optimize import least_squares

    rows = [r for r in yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text(encoding="utf-8"))
            if isinstance(r, dict) and r.get("use") == "fit" and r.get("engine") == engine_name
            and str(r.get("source", "")).startswith(source)]
    if not rows:
        raise SystemExit(f"no use: fit rows for engine {engine_name!r} (source {source!r})")
    measured = np.log([float(r["measured"]) for r in rows])

    def predicted(x: np.ndarray) -> np.ndarray:
        def with_terms(dep: Any) -> Any:
            eng = dataclasses.replace(dep.engine, spec_step_overhead=x[0] * 1e-6,
                                      spec_step_overhead_by_kind=())
            if token_cost:
                eng = dataclasses.replace(eng, verify_token_cost=x[1] * 1e-6)
            return dataclasses.replace(dep, engine=eng)

        return np.array([pv.predict(r, with_terms) for r in rows])

    x0 = [1000.0, 17.0] if token_cost else [1000.0]
    hi = [10000.0, 200.0] if token_cost else [10000.0]
    res = least_squares(lambda x: np.log(predicted(x)) - measured, x0=x0, bounds=([0.0] * len(x0), hi),
                        diff_step=1e-3)
    return res.x, list(zip(rows, predicted(res.x), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine")
    ap.add_argument("--source", default="", help="keep rows whose source starts with this")
    ap.add_argument("--token-cost", action="store_true", help="fit verify_token_cost_us jointly")
    args = ap.parse_args()
    x, pred = fit(args.engine, args.source, args.token_cost)
    print(f"spec_cycle_overhead_us: {x[0]:.0f}")
    if args.token_cost:
        print(f"verify_token_cost_us: {x[1]:.1f}")
    for r, p in pred:
        print(f"# batch {r['batch']:3d} gamma {r['gamma']}: measured {r['measured']:.2f}, fitted {p:.2f} "
              f"({p / r['measured'] - 1:+.1%})")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
    main()
