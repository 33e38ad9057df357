"""`spectune check` on SGLang launch commands: flags, the adaptive config, NGRAM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_support import check, doc_of, sglang_profile
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.engines.serving_config import read_serving_config


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- SGLang
def test_sglang_command_line(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b "
                 "--speculative-algorithm EAGLE3 \\\n"
                 "  --speculative-draft-model-path x/eagle3 --speculative-num-steps 3 \\\n"
                 "  --speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n")
    conf = read_serving_config(str(f))
    assert (conf.engine, conf.method, conf.gamma) == ("sglang", "EAGLE3", 3)
    doc = doc_of(check(runner, f, "-o", "json", prof=sglang_profile(tmp_path)))
    assert doc["config"]["sglang"]["num_steps"] == 3
    assert all(p["configured_gamma"] == 3 for p in doc["points"])


def test_sglang_partial_triple_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm EAGLE "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n")
    with pytest.raises(InputError, match="partial SGLang speculative triple"):
        read_serving_config(str(f))
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm EAGLE "
                 "--speculative-num-steps 3\n")
    with pytest.raises(InputError, match="partial"):
        read_serving_config(str(f))


def test_sglang_recommended_flags_pass_the_gate(runner: CliRunner, tmp_path: Path) -> None:
    prof = sglang_profile(tmp_path)
    flags = runner.invoke(cli, ["emit", prof, "sglang"]).stdout.strip()
    adaptive = runner.invoke(cli, ["emit", prof, "sglang-adaptive-config"]).stdout
    (tmp_path / "spectune-sglang-adaptive.json").write_text(adaptive)
    f = tmp_path / "launch.sh"
    f.write_text(f"python3 -m sglang.launch_server --model-path llama-3.1-8b {flags}\n")
    res = check(runner, f, "-o", "json", prof=prof)
    assert res.exit_code == 0, res.output
    doc = doc_of(res)
    assert doc["config"]["schedule_active"] is True and doc["config"]["sglang"]["adaptive"] is True
    assert all(p["configured_gamma"] == p["recommended_gamma"] for p in doc["points"])


def test_sglang_fix_carries_the_adaptive_config(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm EAGLE3 "
                 "--speculative-draft-model-path x/eagle3 --speculative-num-steps 8 "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 9\n")
    res = check(runner, f, "-o", "json", prof=sglang_profile(tmp_path))
    fix = doc_of(res)["fix"]
    assert fix["engine"] == "sglang" and "--speculative-adaptive-config" in fix["snippet"]
    assert json.loads(fix["adaptive_config"])["1"]["candidate_steps"]


def test_sglang_adaptive_off_under_dp_attention(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"1": {"candidate_steps": [3]}, "64": {"candidate_steps": [1]}}')
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --speculative-algorithm EAGLE --speculative-num-steps 3 "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --speculative-adaptive "
                 "--speculative-adaptive-config a.json --tp-size 2 --enable-dp-attention --dp-size 2\n")
    conf = read_serving_config(str(f))
    assert conf.schedule_active is False and conf.gamma_at(128) == 3
    f.write_text(f.read_text().replace(" --tp-size 2 --enable-dp-attention --dp-size 2", ""))
    conf = read_serving_config(str(f))
    assert conf.schedule_active and conf.gamma_at(1) == 3 and conf.gamma_at(128) == 1


# --------------------------------------------------------------------------- SGLang NGRAM
def test_sglang_ngram_without_steps_names_the_real_problem(tmp_path: Path) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm NGRAM\n")
    with pytest.raises(InputError) as err:
        read_serving_config(str(f))
    assert "partial" not in err.value.message and "are set" not in err.value.message
    assert "NGRAM speculation without --speculative-num-steps" in err.value.message
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm NGRAM "
                 "--speculative-num-draft-tokens 4\n")
    with pytest.raises(InputError, match="while --speculative-num-draft-tokens is set"):
        read_serving_config(str(f))
    f.write_text("python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm NGRAM "
                 "--speculative-num-steps 3 --speculative-ngram-max-bfs-breadth 1\n")
    conf = read_serving_config(str(f))
    assert (conf.method, conf.gamma, conf.sglang and conf.sglang["eagle_topk"]) == ("NGRAM", 3, 1)
