#!/usr/bin/env python3
"""Fit an engine's stack terms to plain-decode serving measurements (a dev tool).

Reads the rows of docs/plain-decode.yaml for one engine profile (default ``sglang-rocm``) and
fits, by least squares on log(TPOT), the two terms a stack without per-kernel tables leaves
unpriced: ``layer_overhead_us`` (fixed seconds per layer per pass: kernel launch and tail
latencies beyond the H100-fitted kernel fixed costs) and ``prefill_token_cost_us`` (seconds
per prompt token a prefill takes beyond its kernel price). TPOT is modelled as in
spectune/documents/validation.py (``plain_tpot``): decode steps stretched by the other requests'
prefills. Prints the two YAML keys and the fit's residuals.

    python scripts/fit_engine_serving.py [engine]
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.documents.profiles import load_engine  # noqa: E402
from spectune.documents.validation import plain_tpot  # noqa: E402


def fit(engine_name: str) -> tuple[float, float, list[tuple[dict, float]]]:
    """(layer_overhead s, prefill_token_cost s, [(row, predicted TPOT s)])."""
    from scipy.optimize import least_squares

    rows = [r for r in yaml.safe_load((ROOT / "docs" / "plain-decode.yaml").read_text(encoding="utf-8"))
            if r.get("engine") == engine_name and r.get("use") == "fit"]
    if not rows:
        raise SystemExit(f"no use: fit rows for engine {engine_name!r} in docs/plain-decode.yaml")
    base = load_engine(engine_name)
    measured = np.array([r["tpot_ms"] * 1e-3 for r in rows])

    def engine(x: np.ndarray) -> object:  # x in microseconds
        return dataclasses.replace(base, layer_overhead=x[0] * 1e-6, prefill_token_cost=x[1] * 1e-6)

    def residuals(x: np.ndarray) -> np.ndarray:
        e = engine(x)
        return np.log([plain_tpot(r, e) for r in rows]) - np.log(measured)

    res = least_squares(residuals, x0=[300.0, 50.0], bounds=([0.0, 0.0], [5000.0, 5000.0]), diff_step=1e-3)
    e = engine(res.x)
    return res.x[0] * 1e-6, res.x[1] * 1e-6, [(r, plain_tpot(r, e)) for r in rows]


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "sglang-rocm"
    layer, prefill, pred = fit(name)
    print(f"layer_overhead_us: {layer * 1e6:.3g}")
    print(f"prefill_token_cost_us: {prefill * 1e6:.3g}")
    for r, t in pred:
        print(f"# concurrency {r['concurrency']:4d}: TPOT measured {r['tpot_ms']:7.2f} ms, "
              f"fitted {t * 1e3:7.2f} ms ({t / (r['tpot_ms'] * 1e-3) - 1:+.0%})", file=sys.stderr)


if __name__ == "__main__":
    main()
