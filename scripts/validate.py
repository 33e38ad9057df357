#!/usr/bin/env python3
"""Predicted vs published speedups, split into 'fitted on' and 'validation only'.

Reads docs/published-speedups.yaml (every row cited in docs/published-speedups.md) and prints
spectune's prediction beside each measured speedup, then for each split: n, median
|predicted / measured - 1| and the share of points where the sign of (speedup - 1) is right,
and the error band (spectune/core/uncertainty.py) derived from the validation residuals.
docs/validation.md embeds this output: regenerate it with `python scripts/validate.py`.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.core.uncertainty import BAND_COVERAGE, SPEEDUP_BAND  # noqa: E402
from spectune.documents.validation import USES, evaluate, log_residual_band, summarise  # noqa: E402


def main() -> None:
    rows = yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text()) or []
    points = evaluate(rows)
    for use in USES:
        print(f"== {'fitted on' if use == 'fit' else 'validation only'} ==")
        print(f"{'source':38s} {'gpu':9s} {'model':14s} {'tp':>2s} {'B':>3s} {'g':>2s} "
              f"{'meas':>5s} {'pred':>5s} {'err':>6s} sign")
        for p in points:
            if p.use != use:
                continue
            r = p.row
            print(f"{r['source'][:38]:38s} {r['gpu'][:9]:9s} {r['model'][:14]:14s} {r.get('tp', 1):>2} "
                  f"{r['batch']:>3} {r['gamma']:>2} {p.measured:5.2f} {p.predicted:5.2f} "
                  f"{p.error * 100:+5.0f}% {'ok' if p.sign_right else 'WRONG'}")
    print()
    for use in USES:
        s = summarise(p for p in points if p.use == use)
        print(f"{'fitted on' if use == 'fit' else 'validation only':16s} n = {s.n:2d}   "
              f"median |error| = {s.median_abs_error * 100:4.1f}%   "
              f"sign of (speedup - 1) right: {s.sign_right * 100:3.0f}%")
    lo, hi = log_residual_band((p for p in points if p.use == "validation"), BAND_COVERAGE)
    print(f"error band from the validation residuals ({BAND_COVERAGE:.0%} coverage): measured / predicted "
          f"in [{lo:.2f}, {hi:.2f}]; shipped band: [{SPEEDUP_BAND[0]:.2f}, {SPEEDUP_BAND[1]:.2f}]")


if __name__ == "__main__":
    # `... | head` ends the table quietly (the default SIGPIPE action), not with a traceback
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
