"""`spectune rules` loaded into a REAL Prometheus (Debian's package, as the fleet test uses it)
that scrapes two loopback exporters replaying the real vLLM 0.32.0 scrape, two deployments
of the same profile at the same batch and served draft length. Both start healthy: the
recorded acceptance is the exporters' and no acceptance alert is pending. Then one
deployment's acceptance collapses (its per-position counters almost stop): the acceptance
alert must go pending for it, and stay quiet for the other.

Short on wall time: scrapes and rule evaluations every second, a 4 s rate window, and
`--for 1h` so the alert stays pending (the state the test waits for); the collapse is set off
by the test once the healthy state is seen, not by the clock. Marked `prometheus`
(scripts/ci_prometheus.sh runs it); skipped when the binary is absent."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from prometheus_support import TICK, PrometheusServer, ReplayExporter, Traffic, prometheus_binary

from spectune.cli.main import cli
from spectune.core.thresholds import thresholds
from spectune.documents.profiles import load_deployment

pytestmark = pytest.mark.prometheus

PROFILE = "llama-3.1-70b-h100-eagle3"
# per tick: 4 drafts of 3 tokens (K = 3), accepted per position; 1 running request
HEALTHY = Traffic(4, 12, (4, 3, 2), 40, 90, 4, 2.5, 0.02, (1,))  # mean acceptance length 3.25
COLLAPSED = (1, 0, 0)  # accepted per position per tick once collapsed: mean length 1.25
LENGTH = "model_name_deployment:spectune_acceptance_length:mean4s"


@dataclass
class Collapsing(ReplayExporter):
    """A replay exporter whose acceptance falls to COLLAPSED per tick from ``collapse_at``
    (Unix seconds; None: never): its counters keep rising, by less."""

    collapse_at: float | None = None

    def page(self, now: float) -> tuple[str, dict[tuple[str, str], float]]:
        healthy = self.traffic
        k, _ = self.ticks(now)
        if self.collapse_at is not None and k > 0:
            kc = min(k, max(0, int((self.collapse_at - self.t0) / TICK)))
            pairs = zip(healthy.per_pos, COLLAPSED, strict=True)
            self.traffic = replace(healthy, per_pos=tuple((h * kc + c * (k - kc)) / k for h, c in pairs))
        try:
            return super().page(now)
        finally:
            self.traffic = healthy


def _get(prom: PrometheusServer, path: str, **params: str) -> Any:
    r = requests.get(f"{prom.url}/api/v1/{path}", params=params, timeout=5)
    r.raise_for_status()
    return r.json()["data"]


def _low(prom: PrometheusServer) -> list[dict[str, Any]]:
    alerts = _get(prom, "alerts")["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == "SpeculativeAcceptanceLow"]


def _lengths(prom: PrometheusServer) -> dict[str, float]:
    series = _get(prom, "query", query=LENGTH)["result"]
    return {s["metric"]["deployment"]: float(s["value"][1]) for s in series}


def _until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.5)
    return what()


def test_the_acceptance_alert_goes_pending_when_acceptance_collapses(tmp_path: Path) -> None:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    # the premise, from the thresholds the rules carry: batch 1 speculates; collapsed, the
    # acceptance is below its break-even at K = 3; healthy, above the warning level
    band = thresholds(load_deployment(PROFILE), tolerance=0.03).bands[0]
    assert band.batch == 1 and band.gamma_star > 0
    assert 1.25 < band.mean_length(band.breakeven_rate, 3) < band.mean_length(band.warning_rate, 3) < 3.25

    res = CliRunner().invoke(cli, ["rules", PROFILE, "--by", "deployment", "--selector", '{namespace="prod"}',
                                   "--window", "4s", "--for", "1h"])
    assert res.exit_code == 0, res.output
    rules = tmp_path / "spectune.rules.yml"
    rules.write_text(res.output, encoding="utf-8")

    t0 = time.time()
    exporters = {d: Collapsing("tiny-llama", HEALTHY, t0) for d in ("steady", "drifting")}
    for e in exporters.values():
        e.__enter__()
    try:
        targets = [(e.target, {"deployment": d, "namespace": "prod"}) for d, e in exporters.items()]
        with PrometheusServer(binary, tmp_path, targets, interval=1.0, rule_files=(rules,),
                              evaluation_interval=1.0) as prom:
            prom.wait_for_targets(2)
            healthy = _until(lambda: len(_lengths(prom)) == 2 and _lengths(prom))
            time.sleep(2)  # two more evaluations with the recorded acceptance in place
            before = _low(prom)
            exporters["drifting"].collapse_at = time.time()
            after = _until(lambda: _low(prom))
            time.sleep(2)  # two more evaluations: the steady one must stay quiet
            after = _low(prom)
            collapsed = _lengths(prom)
    finally:
        for e in exporters.values():
            e.__exit__(None, None, None)
    assert healthy == {"steady": pytest.approx(3.25, abs=0.01), "drifting": pytest.approx(3.25, abs=0.01)}
    assert before == []
    assert after, "no SpeculativeAcceptanceLow alert within 60 s of the collapse"
    assert {a["labels"]["deployment"] for a in after} == {"drifting"}
    assert {a["state"] for a in after} == {"pending"}
    assert {a["labels"]["severity"] for a in after} == {"critical", "warning"}
    assert all(a["annotations"]["command"].startswith(f"spectune recommend {PROFILE} ") for a in after)
    assert collapsed["steady"] == pytest.approx(3.25, abs=0.01) and collapsed["drifting"] < 1.4
