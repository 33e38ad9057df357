"""`spectune check`: serving configurations as deployed (vLLM config files, command lines,
shell scripts, Kubernetes manifests, SGLang) against a profile's recommendation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from check_support import CI, SPEC2, check, doc_of
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.engines.serving_config import read_serving_config


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- shipped samples
@pytest.mark.parametrize("name", ["vllm-good.yaml", "k8s-good.yaml"])
def test_good_samples_pass(runner: CliRunner, name: str) -> None:
    res = check(runner, CI / name, "-o", "json")
    assert res.exit_code == 0, res.output
    doc = doc_of(res)
    assert doc["verdict"] == "pass" and doc["failing_points"] == 0 and doc["fix"] is None
    assert all(p["configured_gamma"] == p["recommended_gamma"] for p in doc["points"])


@pytest.mark.parametrize("name", ["vllm-bad.yaml", "k8s-bad.yaml"])
def test_bad_samples_fail_with_a_fix(runner: CliRunner, name: str) -> None:
    res = check(runner, CI / name, "-o", "json")
    assert res.exit_code == 1, res.output
    doc = doc_of(res)
    assert doc["verdict"] == "fail" and doc["config"]["num_speculative_tokens"] == 8
    assert any(p["slows_down"] for p in doc["points"])
    assert doc["fix"] and "2" in doc["fix"]["snippet"]
    assert "spectune: check failed" in res.stderr


def test_k8s_bad_sample_reads_the_shell_entrypoint(runner: CliRunner) -> None:
    doc = doc_of(check(runner, CI / "k8s-bad.yaml", "-o", "json"))
    assert doc["config"]["format"] == "kubernetes"
    lines = (CI / "k8s-bad.yaml").read_text().splitlines()
    assert "vllm.entrypoints.openai.api_server" in lines[doc["config"]["line"] - 1]


def test_markdown_report_for_a_pull_request(runner: CliRunner) -> None:
    res = check(runner, CI / "vllm-bad.yaml", "-o", "markdown")
    assert res.exit_code == 1
    md = res.stdout
    assert md.startswith("### spectune check: **FAIL**")
    header = next(ln for ln in md.splitlines() if ln.startswith("| batch"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "batch", "context", "configured γ", "speedup", "recommended γ", "speedup", "shortfall", "status",
        "γ* per point"]
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| batch")]
    assert len(rows) == 5
    assert "SLOWER" in md and "```yaml" in md and "num_speculative_tokens: 2" in md
    good = check(runner, CI / "vllm-good.yaml", "-o", "markdown")
    assert good.exit_code == 0 and good.stdout.startswith("### spectune check: **PASS**")


def test_reports_are_byte_identical(runner: CliRunner) -> None:
    for fmt in ("json", "yaml", "markdown", "table"):
        a = check(runner, CI / "k8s-bad.yaml", "-o", fmt)
        b = check(runner, CI / "k8s-bad.yaml", "-o", fmt)
        assert a.stdout_bytes == b.stdout_bytes


# --------------------------------------------------------------------------- bad input: exit 2
def test_garbage_yaml_names_file_and_line(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.yaml"
    f.write_text("model: x\nport: 8000\nspeculative-config: method: ngram\nmax-num-seqs: 64\n")
    res = check(runner, f)
    assert res.exit_code == 2
    assert f"{f}:3:" in res.stderr and "not valid YAML" in res.stderr


def test_garbage_text_has_no_engine_command(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\necho hello\nrm -rf /tmp/cache\n")
    res = check(runner, f)
    assert res.exit_code == 2 and str(f) in res.stderr
    assert "no vLLM, SGLang or TensorRT-LLM command" in res.stderr


def test_unclosed_quote_names_the_line(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("set -e\n\nvllm serve llama-3.1-8b \\\n  --speculative-config '{\"method\": \"ngram\"\n")
    res = check(runner, f)
    assert res.exit_code == 2 and f"{f}:4:" in res.stderr


def test_bad_json_in_speculative_config(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("# launch\nvllm serve llama-3.1-8b --speculative-config '{method: ngram}'\n")
    res = check(runner, f)
    assert res.exit_code == 2 and f"{f}:2:" in res.stderr and "not valid JSON" in res.stderr


def test_missing_file_and_no_container(runner: CliRunner, tmp_path: Path) -> None:
    assert check(runner, tmp_path / "nope.yaml").exit_code == 2
    f = tmp_path / "svc.yaml"
    f.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    res = check(runner, f)
    assert res.exit_code == 2 and "no container" in res.stderr


# --------------------------------------------------------------------------- vLLM forms
def test_shell_script_with_continuations_quotes_and_comments(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(
        "#!/usr/bin/env bash\n"
        "# start the server\n"
        "export HF_HOME=/data  # cache\n"
        "CUDA_VISIBLE_DEVICES=0 exec vllm serve llama-3.1-8b \\\n"
        "    --port 8000 \\\n"
        "    --speculative_config \"{\\\"method\\\": \\\"ngram\\\", \\\"num_speculative_tokens\\\": 3}\" \\\n"
        "    2>&1 | tee /var/log/vllm.log\n")
    conf = read_serving_config(str(f))
    assert (conf.engine, conf.method, conf.gamma, conf.line) == ("vllm", "ngram", 3, 4)


def test_python_module_entrypoint_and_short_alias(tmp_path: Path) -> None:
    f = tmp_path / "cmd.txt"
    f.write_text("python3 -m vllm.entrypoints.openai.api_server --model llama-3.1-8b -sc "
                 "'{\"method\":\"eagle3\",\"model\":\"x/EAGLE3-y\",\"num_speculative_tokens\":4}'\n")
    conf = read_serving_config(str(f))
    assert (conf.method, conf.model, conf.gamma) == ("eagle3", "x/EAGLE3-y", 4)


def test_dotted_keys_and_top_level_aliases(tmp_path: Path) -> None:
    f = tmp_path / "a.sh"
    f.write_text("vllm serve llama-3.1-8b --speculative-config.method ngram "
                 "--speculative-config.num_speculative_tokens 5\n")
    conf = read_serving_config(str(f))
    assert (conf.method, conf.gamma) == ("ngram", 5)
    f.write_text("vllm serve llama-3.1-8b --spec-method eagle3 --spec-model a/b --spec-tokens 3\n")
    conf = read_serving_config(str(f))
    assert (conf.method, conf.model, conf.gamma) == ("eagle3", "a/b", 3)
    f.write_text("vllm serve llama-3.1-8b --spec-tokens 3 --speculative-config "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":2}'\n")
    with pytest.raises(InputError, match="mutually exclusive"):
        read_serving_config(str(f))


def test_method_inferred_from_the_model_name_as_vllm_does(tmp_path: Path) -> None:
    f = tmp_path / "a.sh"
    f.write_text("vllm serve llama-3.1-8b --speculative-config "
                 "'{\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\",\"num_speculative_tokens\":2}'\n")
    conf = read_serving_config(str(f))
    assert conf.method == "eagle3" and any("infers" in w for w in conf.warnings)


def test_config_file_inside_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("speculative-config:\n  method: ngram\n  num_speculative_tokens: 6\n"
                                        "data-parallel-size: 1\n")
    f = tmp_path / "run.sh"
    f.write_text("vllm serve llama-3.1-8b --config base.yaml\n")
    assert read_serving_config(str(f)).gamma == 6
    f.write_text("vllm serve llama-3.1-8b --config base.yaml --speculative-config "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":2}'\n")
    assert read_serving_config(str(f)).gamma == 2  # command line > config file


def test_no_speculative_config_means_speculation_off(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "plain.yaml"
    f.write_text("model: llama-3.1-8b\nport: 8000\n")
    res = check(runner, f, "-o", "json")
    assert res.exit_code == 1  # the profile says speculation pays ~1.5x
    doc = doc_of(res)
    assert doc["config"]["speculate"] is False
    assert all(p["configured_gamma"] == 0 and p["configured_speedup"] == (1.0 if p["feasible"] else None)
               for p in doc["points"])


def test_schedule_is_evaluated_per_batch_size(runner: CliRunner, tmp_path: Path) -> None:
    spec = {"method": "eagle3", "model": "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge",
            "num_speculative_tokens": 8,
            "num_speculative_tokens_per_batch_size": [[1, 16, 2], [17, 100, 8], [129, 1024, 2]]}
    f = tmp_path / "serve.yaml"
    f.write_text(yaml.safe_dump({"model": "llama-3.1-8b", "speculative-config": spec}))
    doc = doc_of(check(runner, f, "-o", "json"))
    got = {p["batch"]: p["configured_gamma"] for p in doc["points"]}
    assert got == {1: 2, 8: 2, 32: 8, 128: 8, 512: 2}  # 128 falls in the gap: previous K
    assert doc["verdict"] == "fail" and doc["config"]["schedule_active"] is True


def test_data_parallel_turns_the_schedule_off(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve llama-3.1-8b -dp 4 --speculative-config "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":4,"
                 "\"num_speculative_tokens_per_batch_size\":[[1,8,4],[9,4096,1]]}'\n")
    conf = read_serving_config(str(f))
    assert conf.data_parallel == 4 and conf.schedule_active is False
    assert conf.gamma_at(1) == conf.gamma_at(512) == 4
    assert any("vllm-project/vllm#45963" in w for w in conf.warnings)


def test_invalid_schedule_is_refused_like_vllm(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    for sched, msg in (("[[2,8,4]]", "start at batch size 1"), ("[[1,8,4],[8,9,2]]", "overlap"),
                       ("[[1,8,-1]]", "K >= 0")):
        f.write_text(f"vllm serve llama-3.1-8b --speculative-config '{{\"method\":\"ngram\","
                     f"\"num_speculative_tokens\":4,\"num_speculative_tokens_per_batch_size\":{sched}}}'\n")
        with pytest.raises(InputError, match=msg):
            read_serving_config(str(f))


def test_gamma_beyond_gamma_max_is_evaluated_on_an_extended_grid(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve llama-3.1-8b --speculative-config '{\"method\":\"eagle3\",\"model\":"
                 "\"lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge\",\"num_speculative_tokens\":12}'\n")
    res = check(runner, f, "-o", "json")
    assert res.exit_code == 1
    doc = doc_of(res)
    assert all(p["configured_gamma"] == 12 for p in doc["points"])
    assert any("extended to 12" in n for n in doc["notes"])


def test_method_mismatch_fails(runner: CliRunner, tmp_path: Path) -> None:
    """Issue 10: another draft method is another deployment (was a warning): exit 2, both sides named."""
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve llama-3.1-8b --speculative-config "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":2}'\n")
    res = check(runner, f)
    assert res.exit_code == 2, res.output
    assert "draft method: 'ngram' configured" in res.stderr and "eagle3" in res.stderr
    assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- the deployment itself
QWEN = ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --speculative-config "
        "'{\"method\":\"eagle3\",\"model\":\"x/eagle3\",\"num_speculative_tokens\":2}'\n")


@pytest.mark.parametrize(("text", "says"), [
    # the case: Llama-3.1-70B at TP8 with n-gram, checked against another profile
    ("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8 --speculative-config "
     "'{\"method\":\"ngram\",\"num_speculative_tokens\":3}'\n",
     ["model: the configuration serves 'meta-llama/Llama-3.1-70B-Instruct'", "'Llama-3.1-8B'",
      "tensor parallelism: 8 configured, 1 in the profile", "draft method: 'ngram'"]),
    (QWEN, ["model: the configuration serves 'Qwen/Qwen3-8B', the profile is for 'Llama-3.1-8B'"]),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 --speculative-config " + SPEC2.join("''") + "\n",
     ["tensor parallelism: 2 configured, 1"]),
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --speculative-algorithm EAGLE3 "
     "--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3\n",
     ["engine: the configuration runs SGLang, the profile prices 'vllm'"]),
])
def test_another_deployment_fails_naming_both_sides(runner: CliRunner, tmp_path: Path, text: str,
                                                    says: list[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(text)
    res = check(runner, f, "-o", "json")
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 1
    assert f"{f}:1: the serving configuration is not the profile's deployment" in res.stderr
    for s in says:
        assert s in res.stderr


@pytest.mark.parametrize("served", ["meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b",
                                    "/models/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Meta-Llama-3.1-8B"])
def test_the_same_model_by_another_name_passes(runner: CliRunner, tmp_path: Path, served: str) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve {served} --speculative-config " + SPEC2.join("''") + "\n")
    res = check(runner, f)
    assert res.exit_code == 0, res.output


def test_expert_parallelism_is_compared_for_moe_models(runner: CliRunner, tmp_path: Path) -> None:
    prof = str(CI.parent / "deepseek-v4-flash-8xb200-ep.yaml")
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve deepseek-ai/DeepSeek-V4-Flash -dp 8 --speculative-config "
                 "'{\"method\":\"mtp\",\"num_speculative_tokens\":1}'\n")
    res = check(runner, f, prof=prof)
    assert res.exit_code == 2 and "expert parallelism: off configured, ep = 8" in res.stderr, res.output
    f.write_text(f.read_text().replace("-dp 8", "-dp 8 --enable-expert-parallel"))
    assert "expert parallelism" not in check(runner, f, prof=prof).stderr


def test_slowdown_fails_even_within_tolerance(runner: CliRunner) -> None:
    res = check(runner, CI / "vllm-bad.yaml", "--tolerance", "1", "-o", "json")
    assert res.exit_code == 1
    doc = doc_of(res)
    assert [p["ok"] for p in doc["points"]] == [not p["slows_down"] or not p["feasible"]
                                               for p in doc["points"]]
    # the verdict rests on points that fit in memory
    assert any(p["slows_down"] and p["feasible"] for p in doc["points"])


def test_tolerance_changes_the_verdict(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"  # gamma 3 where 2 is best: a few percent short, never slower
    f.write_text("vllm serve llama-3.1-8b --speculative-config '" + SPEC2.replace(": 2}", ": 3}") + "'\n")
    doc = doc_of(check(runner, f, "-o", "json", "--tolerance", "0.5"))
    assert doc["verdict"] == "pass"
    worst = doc["worst"]["shortfall"]
    assert 0 < worst < 0.5
    res = check(runner, f, "--tolerance", str(worst / 2))
    assert res.exit_code == 1


# --------------------------------------------------------------------------- Kubernetes
def test_multi_document_manifest_with_env_expansion(tmp_path: Path) -> None:
    f = tmp_path / "deploy.yaml"
    f.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: sidecar\n    image: busybox\n    command: [sleep, infinity]\n"
        "  - name: server\n    image: vllm/vllm-openai:v0.11.0\n"
        "    env: [{name: K, value: '3'}]\n"
        "    args: [llama-3.1-8b, --speculative-config,"
        " '{\"method\":\"ngram\",\"num_speculative_tokens\":$(K)}']\n")
    conf = read_serving_config(str(f))
    assert (conf.form, conf.method, conf.gamma, conf.line) == ("kubernetes", "ngram", 3, 17)
