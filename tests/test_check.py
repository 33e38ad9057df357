"""`spectune check`: serving configurations as deployed (vLLM config files, command lines,
shell scripts, Kubernetes manifests, SGLang) against a profile's recommendation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from click.testing import CliRunner, Result

from spectune.cli.main import cli
from spectune.engines.serving_config import read_serving_config
from spectune.errors import InputError

CI = Path(__file__).resolve().parent.parent / "examples" / "ci"
PROFILE = str(CI / "profile.yaml")
SPEC2 = '{"method": "eagle3", "model": "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge", ' \
        '"num_speculative_tokens": 2}'


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def check(runner: CliRunner, path: Path | str, *extra: str, prof: str = PROFILE) -> Result:
    return runner.invoke(cli, ["check", str(path), "--profile", prof, *extra])


def doc_of(res: Result) -> dict[str, Any]:
    return json.loads(res.stdout)


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


# --------------------------------------------------------------------------- SGLang
def sglang_profile(tmp_path: Path) -> str:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(
        drafter={"kind": "eagle3", "path": "x/eagle3", "hf_config": {
            "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
            "vocab_size": 128256, "model_type": "llama"}},
        engine={"name": "sglang", "family": "sglang", "pass_overhead_us": 300, "layer_overhead_us": 5,
                "draft_pass_overhead_us": 150, "verify_token_cost_us": 1},
        acceptance={"per_position": [0.8, 0.7, 0.6]},
        workload={"batch_sizes": [1, 64, 512, 2048], "context_lengths": [1024]})))
    return str(f)


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


# --------------------------------------------------------------------------- the CI workflow
def _workflow() -> dict[str, Any]:
    return yaml.safe_load((CI / "github-actions-spectune-check.yml").read_text())


def test_workflow_filters_pull_requests_by_path() -> None:
    wf = _workflow()
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert on["pull_request"]["paths"]
    steps = wf["jobs"]["speculation"]["steps"]
    script = next(s["run"] for s in steps if "spectune check" in s.get("run", ""))
    assert "-o markdown" in script and "GITHUB_STEP_SUMMARY" in script


def test_workflow_script_gates_only_the_changed_configs(tmp_path: Path) -> None:
    """Run the workflow's own shell step in a scratch git repository."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("git") is None or shutil.which("bash") is None:
        pytest.skip("needs git and bash")
    wf = _workflow()
    step = next(s for s in wf["jobs"]["speculation"]["steps"] if "spectune check" in s.get("run", ""))
    script = step["run"].replace("${{ github.base_ref }}", "main")
    repo = tmp_path / "repo"
    (repo / "deploy" / "app").mkdir(parents=True)
    (repo / "spectune").mkdir()
    shutil.copy(CI / "profile.yaml", repo / "spectune" / "profile.yaml")
    shutil.copy(CI / "vllm-good.yaml", repo / "deploy" / "serve.yaml")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "spectune"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m spectune "$@"\n')
    wrapper.chmod(0o755)
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, **wf["env"], "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    def pull_request(path: str, source: Path) -> tuple[int, str]:
        git("checkout", "-q", "-B", "pr", "main")
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, repo / path)
        git("add", "-A")
        git("commit", "-q", "-m", "pr")
        summary = tmp_path / f"summary-{source.stem}.md"
        env["GITHUB_STEP_SUMMARY"] = str(summary)
        proc = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
        return proc.returncode, summary.read_text() if summary.exists() else proc.stdout + proc.stderr

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    git("update-ref", "refs/remotes/origin/main", "main")
    code, summary = pull_request("deploy/app/k8s.yaml", CI / "k8s-bad.yaml")
    assert code == 1, summary
    assert "spectune check: **FAIL**" in summary and "deploy/app/k8s.yaml" in summary
    assert "deploy/serve.yaml" not in summary  # unchanged: not checked
    code, summary = pull_request("deploy/app/k8s.yaml", CI / "k8s-good.yaml")
    assert code == 0 and "spectune check: **PASS**" in summary, summary


def test_fix_reports_what_it_leaves_when_gamma_star_moves_with_context(runner: CliRunner,
                                                                       tmp_path: Path) -> None:
    from builders import DATA, GPU

    head = json.loads((DATA / "eagle3-draft--specforge-llama3-70B-ealge3.json").read_text())
    f = tmp_path / "dep.yaml"
    # 256 sequences at 8k context need ~280 GB of KV cache: a GPU big enough to hold them.
    f.write_text(yaml.safe_dump(profile(
        gpu={**GPU, "memory_gb": 1000},
        drafter={"kind": "eagle3", "path": "x/eagle3", "hf_config": head},
        acceptance={"per_position": [0.8, 0.75, 0.7, 0.65]},
        workload={"batch_sizes": [256], "context_lengths": [1024, 8192]})))
    rec = json.loads(runner.invoke(cli, ["recommend", str(f), "-o", "json"]).stdout)
    gammas = {p["gamma"] for p in rec["points"]}
    assert len(gammas) > 1, "gamma* should differ between the two contexts"
    cmd = tmp_path / "serve.sh"
    cmd.write_text("vllm serve llama-3.1-8b --speculative-config "
                   "'{\"method\":\"eagle3\",\"model\":\"x/eagle3\",\"num_speculative_tokens\":8}'\n")
    doc = doc_of(check(runner, cmd, "-o", "json", "--tolerance", "0", prof=str(f)))
    fix = doc["fix"]
    assert fix is not None and fix["max_shortfall"] > 0  # one K per batch size cannot follow context
    assert any("even the recommended settings leave" in n for n in doc["notes"])


# --------------------------------------------------------------------------- the gate and its own fix
EXAMPLES = CI.parent


def launch(prof: str, engine: str) -> str:
    """Model and parallelism options that launch the profile's deployment on ``engine``."""
    from spectune.documents.profiles import load_deployment

    dep = load_deployment(prof)
    p = dep.parallelism
    if engine == "vllm":
        return (f"{dep.model.name} -tp {p.tp}" + (f" -dp {p.dp}" if p.dp > 1 else "")
                + (" --enable-expert-parallel" if p.ep > 1 else ""))
    # SGLang's --tp-size counts every GPU under attention DP (each rank's TP is tp/dp)
    return (f"--model-path {dep.model.name} --tp-size {p.tp * p.dp}"
            + (f" --ep-size {p.ep}" if p.ep > 1 else "")
            + (f" --enable-dp-attention --dp-size {p.dp}" if p.dp > 1 else ""))


@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
@pytest.mark.parametrize("kind", ["vllm-yaml", "vllm", "sglang"])
def test_emitted_settings_pass_the_gate(runner: CliRunner, tmp_path: Path, example: str, kind: str) -> None:
    """emit -> check round trip: the gate compares against what the engine can be set to (a
    per-batch schedule, or one static gamma), so the recommended settings always pass."""
    prof = str(EXAMPLES / f"{example}.yaml")
    engine = "sglang" if kind == "sglang" else "vllm"
    data = yaml.safe_load(Path(prof).read_text())
    if engine not in str(data.get("engine", "vllm")):
        # the gate refuses a config for another engine than the profile prices
        (tmp_path / f"{engine}.yaml").write_text(yaml.safe_dump({**data, "engine": engine}))
        prof = str(tmp_path / f"{engine}.yaml")
    emitted = runner.invoke(cli, ["emit", prof, kind])
    if kind.startswith("vllm") and "eagle2" in example:  # a draft tree: SGLang only
        assert emitted.exit_code == 2 and "topk" in emitted.stderr and "SGLang" in emitted.stderr
        return
    assert emitted.exit_code == 0, emitted.output
    if kind == "vllm-yaml":
        f = tmp_path / "serve.yaml"
        f.write_text(emitted.stdout)
    elif kind == "vllm":
        f = tmp_path / "serve.sh"
        f.write_text(f"vllm serve {launch(prof, 'vllm')} --speculative-config '{emitted.stdout.strip()}'\n")
    else:
        adaptive = runner.invoke(cli, ["emit", prof, "sglang-adaptive-config"])
        if adaptive.exit_code == 0:
            (tmp_path / "spectune-sglang-adaptive.json").write_text(adaptive.stdout)
        f = tmp_path / "launch.sh"
        f.write_text(f"python -m sglang.launch_server {launch(prof, 'sglang')} {emitted.stdout.strip()}\n")
    res = check(runner, f, "-o", "json", prof=prof)
    assert res.exit_code == 0, res.stdout + res.stderr
    doc = doc_of(res)
    assert doc["verdict"] == "pass" and doc["fix"] is None
    assert all(p["configured_gamma"] == p["recommended_gamma"] for p in doc["points"])
    assert not any(p["slows_down"] for p in doc["points"])


def test_gate_reports_unconstrained_gamma_star_but_compares_with_the_schedule(runner: CliRunner,
                                                                               tmp_path: Path) -> None:
    """The reviewer's case: one K per batch size cannot follow gamma* across contexts."""
    prof = str(EXAMPLES / "llama-3.1-70b-h100-eagle3.yaml")
    f = tmp_path / "rt.yaml"
    f.write_text(runner.invoke(cli, ["emit", prof, "vllm-yaml"]).stdout)
    res = check(runner, f, "-o", "json", prof=prof)
    assert res.exit_code == 0, res.output
    doc = doc_of(res)
    differs = [p for p in doc["points"] if p["unconstrained_gamma"] != p["recommended_gamma"]]
    assert differs, "gamma* should move with context length somewhere in this example"
    # gamma* is the smallest gamma within the tie tolerance (1 %) of the best
    assert all(p["unconstrained_speedup"] >= p["recommended_speedup"] / 1.0101 for p in doc["points"]
               if p["feasible"])
    assert "gamma per batch size" in doc["summary"]
    # the note appears exactly when, at a point that fits in memory, the engine's settings
    # leave more than the tolerance of the unconstrained gamma* speedup
    gap = max(1 - p["recommended_speedup"] / p["unconstrained_speedup"]
              for p in doc["points"] if p["feasible"])
    assert any("even the recommended settings leave" in n for n in doc["notes"]) == (gap > 0.03)


def test_data_parallel_gate_compares_with_one_static_gamma(runner: CliRunner, tmp_path: Path) -> None:
    """vLLM ignores a schedule with dp > 1: the best it can be set to is one static K."""
    from spectune.core.recommend import recommend
    from spectune.documents.profiles import load_deployment
    from spectune.engines.emit import make_plan

    dp = tmp_path / "dp.yaml"
    dp.write_text(yaml.safe_dump(profile(
        drafter={"kind": "ngram"}, acceptance={"alpha": 0.6}, parallelism={"tp": 1, "dp": 4},
        workload={"batch_sizes": [4, 16, 64, 256, 1024], "context_lengths": [2048]})))
    plan = make_plan(recommend(load_deployment(str(dp))))
    assert plan.varies
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve llama-3.1-8b -dp 4 --speculative-config "
                 f"'{{\"method\":\"ngram\",\"num_speculative_tokens\":{plan.static_gamma}}}'\n")
    res = check(runner, f, "-o", "json", prof=str(dp))
    assert res.exit_code == 0, res.output
    doc = doc_of(res)
    assert {p["recommended_gamma"] for p in doc["points"]} == {plan.static_gamma}
    assert len({p["unconstrained_gamma"] for p in doc["points"]}) > 1
    assert f"one gamma = {plan.static_gamma}" in doc["summary"]


def test_a_slowdown_fails_even_when_the_recommended_settings_match(runner: CliRunner, tmp_path: Path) -> None:
    from spectune.errors import EXIT_GATE_FAILED

    res = check(runner, CI / "vllm-bad.yaml", "--tolerance", "1", "-o", "json")
    assert res.exit_code == EXIT_GATE_FAILED
    doc = doc_of(res)
    assert doc["exit_code"] == EXIT_GATE_FAILED and any(p["slows_down"] for p in doc["points"])


# --------------------------------------------------------------------------- draft-length ranges: exit 2
@pytest.mark.parametrize("value", ["1e300", "100000", "65", ".inf", "-1"])
def test_num_speculative_tokens_out_of_range(runner: CliRunner, tmp_path: Path, value: str) -> None:
    f = tmp_path / "serve.yaml"
    f.write_text("model: llama-3.1-8b\nspeculative-config:\n  method: ngram\n"
                 f"  num_speculative_tokens: {value}\n")
    res = check(runner, f)
    assert res.exit_code == 2, res.output
    assert f"{f}:3: num_speculative_tokens must be" in res.stderr  # the speculative-config mapping
    assert "Traceback" not in res.output


def test_schedule_k_out_of_range(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve llama-3.1-8b --speculative-config "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":4,"
                 "\"num_speculative_tokens_per_batch_size\":[[1,8,4],[9,64,100000]]}'\n")
    with pytest.raises(InputError, match="K must be from 0 to 64"):
        read_serving_config(str(f))


@pytest.mark.parametrize("flags,option", [
    ("--speculative-num-steps -3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
     "--speculative-num-steps"),
    ("--speculative-num-steps 100000 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
     "--speculative-num-steps"),
    ("--speculative-num-steps 3 --speculative-eagle-topk 0 --speculative-num-draft-tokens 4",
     "--speculative-eagle-topk"),
    ("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 0",
     "--speculative-num-draft-tokens"),
])
def test_sglang_triple_out_of_range(runner: CliRunner, tmp_path: Path, flags: str, option: str) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("# SGLang\npython -m sglang.launch_server --model-path llama-3.1-8b "
                 "--speculative-algorithm EAGLE3 "
                 f"{flags}\n")
    res = check(runner, f, "-o", "json", prof=sglang_profile(tmp_path))
    assert res.exit_code == 2, res.output
    assert f"{f}:2: {option} must be" in res.stderr


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


# --------------------------------------------------------------------------- parsing kept after clean-up
def test_store_true_flag_before_a_positional_and_two_engine_containers(tmp_path: Path) -> None:
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --enable-dp-attention llama-3.1-8b --dp-size 2 --tp 2 "
                 "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
                 "--speculative-num-draft-tokens 4\n")
    conf = read_serving_config(str(f))
    assert conf.data_parallel == 2 and conf.tensor_parallel == 1 and conf.gamma == 3
    k8s = tmp_path / "pod.yaml"
    k8s.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                   "  - name: a\n    image: vllm/vllm-openai\n    args: [llama-3.1-8b, --speculative-config, "
                   "'{\"method\":\"ngram\",\"num_speculative_tokens\":3}', -dp, '0']\n"
                   "  - name: b\n    image: vllm/vllm-openai\n    args: [m]\n")
    with pytest.raises(InputError, match="-dp must be >= 1"):
        read_serving_config(str(k8s))
    k8s.write_text(k8s.read_text().replace(", -dp, '0'", ""))
    conf = read_serving_config(str(k8s))
    assert conf.warnings[0] == "2 engine containers found; checked 'a' (line 8)"


def test_an_engine_profile_named_for_neither_engine_is_priced_by_its_family(runner: CliRunner,
                                                                           tmp_path: Path) -> None:
    """Custom engine costs are not another engine: the gate runs on the engine the profile's
    `family` names, whatever the engine is called; another family is a mismatch."""
    data = yaml.safe_load(Path(PROFILE).read_text())
    data["engine"]["name"] = "tuned-h100"
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(data))
    res = check(runner, CI / "vllm-good.yaml", prof=str(prof))
    assert res.exit_code == 0, res.output
    assert "engine" not in res.stderr
    data["engine"]["family"] = "sglang"
    prof.write_text(yaml.safe_dump(data))
    res = check(runner, CI / "vllm-good.yaml", "-o", "json", prof=str(prof))
    assert "engine: the configuration runs vLLM, the profile prices 'tuned-h100' (SGLang)" in res.output


def test_an_engine_named_after_another_engine_is_priced_by_its_family(runner: CliRunner,
                                                                      tmp_path: Path) -> None:
    """An engine profile called `sglang-tuned` whose family is vLLM is vLLM's everywhere: the gate
    compares a vLLM configuration with it, `emit` adds no other-engine note, the report deploys vLLM."""
    from spectune.api import load_profile, recommend
    from spectune.engines.emit import build_snippet
    from spectune.render.report import deploy_settings

    data = yaml.safe_load(Path(PROFILE).read_text())
    data["engine"]["name"] = "sglang-tuned"
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(data))
    res = check(runner, CI / "vllm-good.yaml", "-o", "json", prof=str(prof))
    assert res.exit_code == 0, res.output
    assert "the configuration runs vLLM" not in res.output
    rec = recommend(load_profile(prof))
    assert rec.deployment.engine.family == "vllm"
    assert not any("priced with the profile's engine" in n for n in build_snippet(rec, "vllm").notes)
    other = build_snippet(rec, "sglang").notes
    assert any("priced with the profile's engine 'sglang-tuned'" in n for n in other)
    deploy = deploy_settings(rec)
    assert deploy.kind == "vllm" and deploy.command is not None
    assert deploy.command.startswith("vllm serve MODEL --speculative-config")


def test_sglang_dp_attention_splits_the_tp_size(tmp_path: Path) -> None:
    """Under --enable-dp-attention SGLang's --tp-size is every GPU and each attention rank runs
    tp/dp of them (dp_attention.py, attn_tp_size = tp_size // dp_size): spectune's tp is that;
    without it --dp-size is independent replicas, each priced alone."""
    f = tmp_path / "launch.sh"
    base = "python -m sglang.launch_server --model-path m --tp 8 --dp-size {dp}{flag}\n"
    f.write_text(base.format(dp=8, flag=" --enable-dp-attention"))
    conf = read_serving_config(str(f))
    assert (conf.tensor_parallel, conf.data_parallel) == (1, 8)
    f.write_text(base.format(dp=2, flag=" --enable-dp-attention"))
    assert (read_serving_config(str(f)).tensor_parallel, read_serving_config(str(f)).data_parallel) == (4, 2)
    f.write_text(base.format(dp=2, flag=""))
    conf = read_serving_config(str(f))
    assert (conf.tensor_parallel, conf.data_parallel) == (8, 1)
    f.write_text(base.format(dp=3, flag=" --enable-dp-attention"))
    with pytest.raises(InputError) as err:
        read_serving_config(str(f))
    assert "launch.sh:1: --dp-size" in str(err.value) and "not a multiple" in str(err.value)
