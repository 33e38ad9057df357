#!/usr/bin/env python3
"""Speed benchmark (prints figures; not a test).

1. Cold wall time of `spectune recommend` on the shipped example, a fresh interpreter each
   run (median of N).
2. Start-up against the floor, in interleaved pairs (each pair runs both commands back to
   back, so load on a shared machine hits both alike; the median of the per-pair ratios):
   `spectune recommend` on the Llama-3.1-70B example with `-o json` over a bare
   `import numpy, yaml, click, tabulate` (goal <= 1.3x), and `spectune --help` over a bare
   `import click` (goal: click's cost alone, about 1.0-1.1x). `spectune` is run as its
   console script runs it (``from spectune.cli.main import main; main()``, what pip's
   ``spectune`` entry point executes); ``python -m spectune`` adds runpy's few ms.
3. Grid evaluation rate: (batch, context, gamma) points per second of the speedup grid.

Goals: under 0.35 s cold on a 2-core machine; the ratios above; over 1e6 points/s.

Every command runs as an installed package runs: with compiled bytecode (kept under a
temporary PYTHONPYCACHEPREFIX, warmed by a first run), even where the environment sets
PYTHONDONTWRITEBYTECODE -- NumPy, PyYAML and click are installed with theirs, and compiling
spectune's sources on every run (about 50 ms) would be measured instead of its start-up.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "deepseek-v4-flash-b200-mtp.yaml"


# The environment of every measured run: bytecode written and read, outside the source tree.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "spectune-bench-pycache")
ENV["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])


def cold_runs(n: int = 7) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "spectune", "recommend", str(EXAMPLE)], env=ENV,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


LLAMA = ROOT / "examples" / "llama-3.1-70b-h100-eagle3.yaml"
# The `spectune` command as its console script runs it (pyproject.toml: spectune.cli.main:main).
SPECTUNE = [sys.executable, "-c", "from spectune.cli.main import main; main()"]


# The same, compiling spectune's sources on every run (no bytecode written or read for it).
SOURCE_ENV = {k: v for k, v in ENV.items() if k != "PYTHONPYCACHEPREFIX"} | {"PYTHONDONTWRITEBYTECODE": "1"}


def _wall(cmd: list[str], env: dict[str, str] = ENV) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ratio(cmd: list[str], floor: list[str], pairs: int = 11,
          env: dict[str, str] = ENV) -> tuple[float, float, float]:
    """Median over interleaved pairs of wall(cmd) / wall(floor), and the two medians (s)."""
    _wall(cmd, env), _wall(floor, env)  # warm the file cache
    a, b = [], []
    for i in range(pairs):
        if i % 2:  # alternate which goes first
            b.append(_wall(floor, env))
            a.append(_wall(cmd, env))
        else:
            a.append(_wall(cmd, env))
            b.append(_wall(floor, env))
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    return statistics.median(ratios), statistics.median(a), statistics.median(b)


def grid_rate() -> tuple[int, float]:
    from spectune.core.speedup import speedup_grid
    from spectune.documents.profiles import load_deployment

    dep = load_deployment(str(EXAMPLE))
    batches = tuple(int(b) for b in np.unique(np.geomspace(1, 4096, 400).astype(int)))
    contexts = tuple(int(s) for s in np.geomspace(256, 1_048_576, 200).astype(int))
    # The grid evaluator takes arrays directly: a profile's workload is capped at 1,024 points,
    # a bound on what a user may ask for, not on what the evaluator can do.
    speedup_grid(dep, batches, contexts, 15)  # warm caches
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        grid = speedup_grid(dep, batches, contexts, 15)
        _ = grid.speedup
        best = min(best, time.perf_counter() - t0)
    points = len(batches) * len(contexts) * 16
    return points, points / best


def main() -> None:
    _wall([*SPECTUNE, "recommend", str(EXAMPLE)])  # compile once (bytecode under ENV's prefix)
    runs = cold_runs()
    print(f"cold `spectune recommend {EXAMPLE.name}`: median {statistics.median(runs):.3f} s, "
          f"min {min(runs):.3f} s over {len(runs)} runs (goal < 0.35 s)")
    py = [sys.executable]
    r, a, b = ratio([*SPECTUNE, "recommend", str(LLAMA), "-o", "json"],
                    [*py, "-c", "import numpy, yaml, click, tabulate"])
    print(f"start-up: `spectune recommend {LLAMA.name} -o json` {a:.3f} s over bare imports of numpy, "
          f"yaml, click and tabulate {b:.3f} s: {r:.2f}x (median of per-pair ratios; goal <= 1.30x)")
    r, a, b = ratio([*SPECTUNE, "recommend", str(LLAMA), "-o", "json"],
                    [*py, "-c", "import numpy, yaml, click, tabulate"], env=SOURCE_ENV)
    print(f"  the same with spectune's sources compiled on every run (PYTHONDONTWRITEBYTECODE, no "
          f"__pycache__): {a:.3f} s over {b:.3f} s: {r:.2f}x")
    r, a, b = ratio([*SPECTUNE, "--help"], [*py, "-c", "import click"])
    print(f"start-up: `spectune --help` {a:.3f} s over a bare `import click` {b:.3f} s: {r:.2f}x "
          "(median of per-pair ratios; goal about 1.0-1.1x)")
    points, rate = grid_rate()
    print(f"speedup grid: {points:,} (batch, context, gamma) points at {rate:,.0f} points/s "
          f"(goal > 1,000,000)")


if __name__ == "__main__":
    main()
