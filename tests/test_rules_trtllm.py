"""`spectune rules` on TensorRT-LLM's counters, checked by promtool (`promtool test rules`): the
series a trtllm-serve shows at /prometheus/metrics (names and labels from
tensorrt_llm/metrics/collector.py, spectune/engines/trtllm/metrics.py) go in, the recorded
acceptance comes out as the counters imply. Marked `prometheus`; skipped without promtool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_rules_promtool import EVAL, MINUTES, generate, run_promtool

from spectune.engines.trtllm import metrics as trt

pytestmark = pytest.mark.prometheus
ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "examples" / "llama-3.1-70b-h100-eagle3-trtllm.yaml"
# per minute, multiples of 60 so Prometheus's rates and their ratios are exact
DRAFTED, ACCEPTED = (960.0, 960.0, 720.0), (720.0, 480.0, 240.0)


def _series() -> list[dict[str, str]]:
    base = 'namespace="prod", deployment="trt", model_name="trt", engine_type="trtllm", instance="t:8000"'
    out = [{"series": f"{trt.RUNNING}{{{base}}}", "values": f"12x{MINUTES}"},
           {"series": f"{trt.DRAFT_TOKENS}{{{base}}}", "values": f"0+{sum(DRAFTED):g}x{MINUTES}"},
           {"series": f"{trt.ACCEPTED}{{{base}}}", "values": f"0+{sum(ACCEPTED):g}x{MINUTES}"}]
    for i, (d, a) in enumerate(zip(DRAFTED, ACCEPTED, strict=True)):
        lab = f'{{{base}, token_position="{i}"}}'
        out += [{"series": f"{trt.DRAFTED_POS}{lab}", "values": f"0+{d:g}x{MINUTES}"},
                {"series": f"{trt.ACCEPTED_POS}{lab}", "values": f"0+{a:g}x{MINUTES}"}]
    return out


def _sample(metric: str, extra: str, value: float) -> dict[str, Any]:
    labels = f'model_name="trt", deployment="trt"{extra}'
    return {"expr": f"round(model_name_deployment:spectune_{metric}:mean5m{{{labels}}}, 0.001)",
            "eval_time": EVAL,
            "exp_samples": [{"labels": f'{{{labels}, serving_engine="trtllm"}}', "value": round(value, 3)}]}


def _test_file(tmp_path: Path, samples: list[dict[str, Any]]) -> Path:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("prometheus: http://prometheus:9090\nselector: '{namespace=\"prod\"}'\n"
                     "by: [deployment]\ndeployments:\n  - match: {model_name: trt}\n"
                     f"    profile: {PROFILE}\n", encoding="utf-8")
    rules = generate(tmp_path, str(fleet), "--window", "5m", "--for", "10m")
    doc = {"rule_files": [rules.name], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": _series(), "promql_expr_test": samples}]}
    path = tmp_path / "trtllm.test.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20), encoding="utf-8")
    return path


def test_recorded_acceptance_is_what_the_counters_imply(tmp_path: Path) -> None:
    drafts = DRAFTED[0]  # every draft proposes position 0
    samples = [_sample("acceptance_length", "", 1 + sum(ACCEPTED) / drafts),
               _sample("acceptance_rate", "", sum(ACCEPTED) / sum(DRAFTED)),
               _sample("draft_tokens_per_step", "", sum(DRAFTED) / drafts),
               *(_sample("acceptance_per_position", f', position="{i}"', a / drafts)
                 for i, a in enumerate(ACCEPTED))]
    res = run_promtool("test", "rules", str(_test_file(tmp_path, samples)))
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    res = run_promtool("test", "rules", str(_test_file(tmp_path, [_sample("acceptance_length", "", 2.0)])))
    assert res.returncode != 0
