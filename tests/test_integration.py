"""Where two features meet: cases a review of the merged features found (each failed before
its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_calibrate import _observation_files, _profile

from spectune.cli.main import cli


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize("args", [
    ["cost", "--gpu", "b200", "--model", "deepseek-v4-flash", "--batch", "8", "--context", "4096",
     "--coactivation", "nan"],
    ["widthdepth", "qwen3.6-35b-a3b-b200-mtp", "--positions", "22", "--batch", "11", "--alpha", "nan"],
    ["widthdepth", "qwen3.6-35b-a3b-b200-mtp", "--positions", "22", "--batch", "11", "--alpha", "0.9",
     "--coactivation", "nan"],
])
def test_nan_options_are_usage_errors(runner: CliRunner, args: list[str]) -> None:
    res = runner.invoke(cli, args)
    assert res.exit_code == 2 and "not a finite number" in res.stderr


def test_coactivation_on_a_dense_model_is_a_usage_error(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["cost", "--gpu", "h100", "--model", "llama-3.1-8b", "--batch", "8",
                              "--context", "1024", "--coactivation", "0.5"])
    assert res.exit_code == 2 and "has no MoE layers" in res.stderr and "Traceback" not in res.output
    plain = runner.invoke(cli, ["cost", "--gpu", "h100", "--model", "llama-3.1-8b", "--batch", "8",
                                "--context", "1024", "-o", "json"])
    assert plain.exit_code == 0 and json.loads(plain.stdout)["routing"] == "none (dense model)"


def test_detail_keeps_the_ragged_and_slo_tables(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["recommend", "qwen3.6-35b-a3b-b200-mtp", "--ragged", "--tpot-slo", "25ms",
                              "--detail"])
    assert res.exit_code == 0, res.output
    assert "ragged depths" in res.stdout and "goodput at TPOT" in res.stdout


def test_emit_for_another_engine_than_the_profile_prices_says_so(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["emit", "llama-3.1-70b-h100-eagle3", "sglang"])
    assert res.exit_code == 0
    assert "priced with the profile's engine 'vllm', not sglang" in res.stderr
    same = runner.invoke(cli, ["emit", "llama-3.1-70b-h100-eagle3", "vllm"])
    assert "priced with the profile's engine" not in same.stderr


def test_a_calibration_for_another_deployment_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    p = _profile(tmp_path)
    res = runner.invoke(cli, ["calibrate", *_observation_files(tmp_path), "--profile", str(p), "-o", "yaml"])
    assert res.exit_code == 0, res.output
    calib = tmp_path / "calib.yaml"
    calib.write_text(res.stdout)
    other = runner.invoke(cli, ["recommend", "llama-3.1-8b-h100-eagle2-sglang", "--calibration", str(calib)])
    assert other.exit_code == 2
    assert "fitted for another deployment" in other.stderr and "gpu: fitted for 'cpu'" in other.stderr
    assert runner.invoke(cli, ["recommend", str(p), "--calibration", str(calib)]).exit_code == 0
