"""`spectune rules` loaded into a REAL Prometheus (Debian's package, as the fleet test uses it)
that scrapes two loopback exporters replaying the real vLLM 0.32.0 scrape: one deployment
whose acceptance has collapsed, one healthy, both at the batch and served draft length of
the same profile. The acceptance alert must go pending for the collapsed one and not for
the healthy one; the recorded series must show the acceptance the exporters serve.

Short on wall time: scrapes and rule evaluations every second, a 4 s rate window, and
`--for 1h` so the alert stays pending (the state the test waits for). Marked `prometheus`
(scripts/ci_prometheus.sh runs it); skipped when the binary is absent."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from prometheus_support import PrometheusServer, ReplayExporter, Traffic, prometheus_binary

from spectune.cli import cli
from spectune.profiles import load_deployment
from spectune.thresholds import thresholds

pytestmark = pytest.mark.prometheus

PROFILE = "llama-3.1-70b-h100-eagle3"
# per tick: 4 drafts of 3 tokens (K = 3), accepted per position; running requests 1
HEALTHY = Traffic(4, 12, (4, 3, 2), 40, 90, 4, 2.5, 0.02, (1,))  # mean acceptance length 3.25
COLLAPSED = Traffic(4, 12, (1, 0, 0), 40, 90, 4, 2.5, 0.02, (1,))  # 1.25


def _alerts(prom: PrometheusServer) -> list[dict]:
    r = requests.get(f"{prom.url}/api/v1/alerts", timeout=5)
    r.raise_for_status()
    return r.json()["data"]["alerts"]


def _value(prom: PrometheusServer, expr: str) -> dict[str, float]:
    r = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5)
    r.raise_for_status()
    return {s["metric"].get("deployment", ""): float(s["value"][1]) for s in r.json()["data"]["result"]}


def test_the_acceptance_alert_goes_pending_for_the_collapsed_deployment_only(tmp_path: Path) -> None:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    # the premise, from the same thresholds the rules carry: batch 1 speculates, and the
    # collapsed acceptance is below its break-even at K = 3, the healthy one above the warning
    band = thresholds(load_deployment(PROFILE), tolerance=0.03).bands[0]
    assert band.batch == 1 and band.gamma_star > 0
    assert 1.25 < band.mean_length(band.breakeven_rate, 3) < band.mean_length(band.warning_rate, 3) < 3.25

    res = CliRunner().invoke(cli, ["rules", PROFILE, "--by", "deployment", "--selector", '{namespace="prod"}',
                                   "--window", "4s", "--for", "1h"])
    assert res.exit_code == 0, res.output
    rules = tmp_path / "spectune.rules.yml"
    rules.write_text(res.output, encoding="utf-8")

    t0 = time.time()
    exporters = {"healthy": ReplayExporter("tiny-llama", HEALTHY, t0),
                 "collapsed": ReplayExporter("tiny-llama", COLLAPSED, t0)}
    for e in exporters.values():
        e.__enter__()
    try:
        targets = [(e.target, {"deployment": d, "namespace": "prod"}) for d, e in exporters.items()]
        with PrometheusServer(binary, tmp_path, targets, interval=1.0, rule_files=(rules,),
                              evaluation_interval=1.0) as prom:
            prom.wait_for_targets(2)
            deadline = time.monotonic() + 60
            pending: list[dict] = []
            while time.monotonic() < deadline and not pending:
                pending = [a for a in _alerts(prom) if a["labels"]["alertname"] == "SpeculativeAcceptanceLow"]
                time.sleep(0.5)
            length = _value(prom, "model_name_deployment:spectune_acceptance_length:mean4s")
            time.sleep(2)  # two more evaluations: the healthy one must stay quiet
            low = [a for a in _alerts(prom) if a["labels"]["alertname"] == "SpeculativeAcceptanceLow"]
    finally:
        for e in exporters.values():
            e.__exit__(None, None, None)
    assert pending, "no SpeculativeAcceptanceLow alert within 60 s"
    assert {a["labels"]["deployment"] for a in low} == {"collapsed"}
    assert {a["state"] for a in low} == {"pending"}
    assert {a["labels"]["severity"] for a in low} == {"critical", "warning"}
    assert all(a["annotations"]["command"].startswith(f"spectune recommend {PROFILE} ") for a in low)
    assert length["healthy"] == pytest.approx(3.25, abs=0.01)
    assert length["collapsed"] == pytest.approx(1.25, abs=0.01)
