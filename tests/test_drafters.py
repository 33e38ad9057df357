"""Drafters as engines run them: n-gram sizes carried into emitted configs and check fixes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from click.testing import CliRunner

from spectune.cli import cli
from spectune.profiles import load_drafter


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _prof(tmp_path: Path, drafter: Any) -> Path:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(drafter=drafter, acceptance={"alpha": 0.7})))
    return f


def test_builtin_ngram_holds_vllms_default_sizes() -> None:
    d = load_drafter("ngram")
    assert (d.kind, d.prompt_lookup_min, d.prompt_lookup_max) == ("ngram", 5, 5)


def test_emitted_vllm_config_carries_prompt_lookup(runner: CliRunner, tmp_path: Path) -> None:
    f = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"])
    cfg = json.loads(res.stdout)
    assert (cfg["prompt_lookup_min"], cfg["prompt_lookup_max"]) == (2, 4)
    y = yaml.safe_load(runner.invoke(cli, ["recommend", str(f), "--emit", "vllm-yaml"]).stdout)
    assert y["speculative-config"]["prompt_lookup_max"] == 4
    # only one given: vLLM sets the other equal to it, and so does the profile
    one = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_max": 3})
    cfg = json.loads(runner.invoke(cli, ["recommend", str(one), "--emit", "vllm"]).stdout)
    assert (cfg["prompt_lookup_min"], cfg["prompt_lookup_max"]) == (3, 3)


@pytest.mark.parametrize(("drafter", "named"), [
    ({"kind": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2}, "drafter.prompt_lookup_min"),
    ({"kind": "cost_ratio", "cost_ratio": 0.1, "prompt_lookup_max": 2}, "drafter.prompt_lookup_max"),
    ({"kind": "ngram", "prompt_lookup_max": 0}, "drafter.prompt_lookup_max"),
])
def test_bad_prompt_lookup_exits_2(runner: CliRunner, tmp_path: Path, drafter: Any, named: str) -> None:
    res = runner.invoke(cli, ["recommend", str(_prof(tmp_path, drafter))])
    assert res.exit_code == 2 and named in res.stderr


def test_check_warns_on_other_sizes_and_its_fix_carries_the_profiles(runner: CliRunner,
                                                                    tmp_path: Path) -> None:
    f = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    serve = tmp_path / "serve.sh"
    serve.write_text("vllm serve m --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":1}'\n")
    res = runner.invoke(cli, ["check", str(serve), "--profile", str(f), "-o", "json"])
    doc = json.loads(res.stdout)
    assert any("prompt_lookup_min/max = 5/5" in w and "2/4" in w for w in doc["warnings"])
    fix = doc["fix"]
    assert fix is not None and '"prompt_lookup_min":2' in fix["snippet"].replace(" ", "")
    same = tmp_path / "same.sh"
    same.write_text("vllm serve m --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":3,"
                    "\"prompt_lookup_min\":2,\"prompt_lookup_max\":4}'\n")
    doc = json.loads(runner.invoke(cli, ["check", str(same), "--profile", str(f), "-o", "json"]).stdout)
    assert not any("prompt_lookup" in w for w in doc["warnings"])
