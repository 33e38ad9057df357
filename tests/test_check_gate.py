"""`spectune check` as a CI gate: the workflow, the gate against its own emitted settings,
draft-length ranges, and parsing kept after clean-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from check_support import CI, PROFILE, check, doc_of, sglang_profile
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.engines.serving_config import read_serving_config


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


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
    from spectune.base.errors import EXIT_GATE_FAILED

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
