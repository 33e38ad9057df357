"""`spectune observe --prometheus` on TensorRT-LLM: a REAL Prometheus server (Debian's package) on
127.0.0.1 scrapes a loopback trtllm-serve stand-in at /prometheus/metrics whose speculative-decoding
counters (names, types and labels of tensorrt_llm/metrics/collector.py, as in
tests/fixtures/trtllm/) advance at every scrape; the observation equals Prometheus's own increase()
of the raw samples, and its acceptance is what the counters imply. Marked `prometheus`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from observe_support import MetricsServer, Reply
from prometheus_support import PrometheusServer, prometheus_binary, prometheus_increase, wait_until

from spectune.engines.trtllm import METRICS_PATH
from spectune.engines.trtllm import metrics as trt
from spectune.observe.prometheus import observe_prometheus

pytestmark = pytest.mark.prometheus
MODEL = "deepseek-ai/DeepSeek-V3"
# per scrape: drafted at positions 0..2, accepted at positions 0..2 (every draft proposes position 0)
DRAFTED, ACCEPTED = (40, 40, 32), (30, 20, 12)
WINDOW = 8


def page(n: int) -> str:
    base = f'engine_type="trtllm",model_name="{MODEL}"'
    lines = [f"# TYPE {trt.DRAFT_TOKENS} counter",
             f"{trt.DRAFT_TOKENS}{{{base}}} {1000 + n * sum(DRAFTED)}.0",
             f"# TYPE {trt.ACCEPTED} counter", f"{trt.ACCEPTED}{{{base}}} {600 + n * sum(ACCEPTED)}.0",
             f"# TYPE {trt.RUNNING} gauge", f"{trt.RUNNING}{{{base}}} 8.0"]
    for name, per in ((trt.DRAFTED_POS, DRAFTED), (trt.ACCEPTED_POS, ACCEPTED)):
        lines.append(f"# TYPE {name} counter")
        lines += [f'{name}{{{base},token_position="{i}"}} {500 + n * v}.0' for i, v in enumerate(per)]
    return "\n".join(lines) + "\n"


def test_prometheus_path_gives_the_counters_acceptance(tmp_path: Path) -> None:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    with MetricsServer(lambda n: Reply(body=page(n)), metrics_path=METRICS_PATH) as exporter:
        target = exporter.url.removeprefix("http://").removesuffix(METRICS_PATH)
        with PrometheusServer(binary, tmp_path, [(target, {"deployment": "trt"})],
                              metrics_path=METRICS_PATH) as prom:
            prom.wait_for_targets(1)
            at = float(int(time.time()) + WINDOW + 1)
            wait_until(at + 1)
            fleet = observe_prometheus(prom.url, window=WINDOW, at=at, interval=1.0, by=("deployment",))

            def independent(name: str, position: str | None = None) -> float:
                sel = 'deployment="trt"' + (f',token_position="{position}"' if position is not None else "")
                return sum(prometheus_increase(s, round((at - WINDOW) * 1000), round(at * 1000)) or 0.0
                           for _, s in prom.raw(f"{name}{{{sel}}}[{WINDOW}s]", at))

            drafts = independent(trt.DRAFTED_POS, "0")
            accepted = [independent(trt.ACCEPTED_POS, str(i)) for i in range(3)]
    (obs,) = fleet.observations
    assert obs.engine.name == "trtllm" and obs.source.kind == "prometheus"
    assert obs.speculation.drafts == pytest.approx(drafts, rel=1e-9)
    assert obs.speculation.accepted_tokens == pytest.approx(sum(accepted), rel=1e-9)
    # every series grows by the same scrapes, so increase()'s extrapolation scales them alike:
    # the acceptance is the counters' own, a_1 = 30/40, a_2 = 20/30, a_3 = 12/20
    assert obs.acceptance is not None
    assert list(obs.acceptance.conditional) == pytest.approx([30 / 40, 20 / 30, 12 / 20], rel=1e-9)
