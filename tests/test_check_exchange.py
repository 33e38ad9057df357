"""`spectune check` reads the expert-parallel exchange the server runs: vLLM's
``--all2all-backend`` (and the ``VLLM_ALL2ALL_BACKEND`` variable older releases read), SGLang's
``--moe-a2a-backend`` / ``--deepep-mode`` (and ``--enable-deepep-moe`` before them), from a
command line, a shell script, a ``vllm serve --config`` file or a Kubernetes manifest; it
prices the exchange they set (``Engine.ep_exchange``, spectune/core/cost/comm.py) and refuses,
in one line naming the file, line and setting, a backend it cannot price."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from spectune.cli.main import cli
from spectune.engines.serving_config import read_serving_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# DeepSeek-V4-Flash on 8x B200, vLLM, DP 8 + EP 8: the shipped expert-parallel example
EP_EXAMPLE = str(EXAMPLES / "deepseek-v4-flash-8xb200-ep.yaml")
VLLM = ("vllm serve deepseek-ai/DeepSeek-V4-Flash --data-parallel-size 8 --enable-expert-parallel "
        "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'")
SGLANG = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 --ep-size 8 "
          "--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 3")


def _check(path: Path, prof: str = EP_EXAMPLE) -> Result:
    return CliRunner().invoke(cli, ["check", str(path), "--profile", prof, "-o", "json"])


def _doc(res: Result) -> dict[str, Any]:
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


def _speedups(doc: dict[str, Any]) -> list[float]:
    return [p["configured_speedup"] for p in doc["points"] if p["feasible"]]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


@pytest.fixture
def sglang_profile(tmp_path: Path) -> str:
    """DeepSeek-V3 with its MTP module on 8x H200, SGLang, TP 8 / EP 8 (no attention DP)."""
    f = tmp_path / "dsv3-sglang-ep.yaml"
    f.write_text(yaml.safe_dump({
        "name": "dsv3-sglang-ep", "gpu": "h200", "model": "deepseek-v3", "drafter": "mtp-deepseek-v3",
        "parallelism": {"tp": 8, "ep": 8, "dp": 1}, "engine": "sglang",
        "workload": {"batch_sizes": [1, 8, 32], "context_lengths": [4096]},
        "acceptance": {"alpha": 0.85}, "gamma_max": 3}), encoding="utf-8")
    return str(f)


# --------------------------------------------------------------------------- vLLM
def test_each_vllm_backend_prices_its_own_exchange(tmp_path: Path) -> None:
    docs = {b: _doc(_check(_write(tmp_path, f"{b}.sh", f"{VLLM} --all2all-backend {b}\n")))
            for b in ("allgather_reducescatter", "deepep_low_latency")}
    default = _doc(_check(_write(tmp_path, "default.sh", VLLM + "\n")))
    for b, doc in docs.items():
        assert doc["config"]["ep_exchange"] == b
        assert any(n.startswith(f"expert-parallel exchange priced: {b}, from --all2all-backend {b} (line 1)")
                   for n in doc["notes"]), doc["notes"]
    # the two exchanges cost differently, so the same speculation predicts differently
    gather, deepep = (_speedups(docs[b]) for b in ("allgather_reducescatter", "deepep_low_latency"))
    assert len(gather) == len(deepep) > 0 and gather != deepep
    # no flag: vLLM's default (vllm/config/parallel.py), the same price as stating it
    assert default["config"]["ep_exchange"] == "allgather_reducescatter"
    assert _speedups(default) == gather
    assert any("vLLM's default --all2all-backend allgather_reducescatter" in n for n in default["notes"])


def test_the_text_output_says_which_exchange_it_priced(tmp_path: Path) -> None:
    f = _write(tmp_path, "d.sh", f"{VLLM} --all2all-backend=deepep_low_latency\n")
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", EP_EXAMPLE])
    assert res.exit_code in (0, 1), res.output
    assert "expert-parallel exchange deepep_low_latency" in res.stdout


def test_a_vllm_config_file_and_a_manifest_set_it_too(tmp_path: Path) -> None:
    cfg = _write(tmp_path, "serve.yaml", yaml.safe_dump({
        "model": "deepseek-ai/DeepSeek-V4-Flash", "data-parallel-size": 8, "enable-expert-parallel": True,
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        "all2all_backend": "deepep_low_latency"}))
    assert _doc(_check(cfg))["config"]["ep_exchange"] == "deepep_low_latency"
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.32.0",
        "args": ["deepseek-ai/DeepSeek-V4-Flash", "--data-parallel-size", "8", "--enable-expert-parallel",
                 "--all2all-backend", "deepep_low_latency"]}]}}}}
    assert _doc(_check(_write(tmp_path, "k8s.yaml", yaml.safe_dump(manifest))))["config"]["ep_exchange"] \
        == "deepep_low_latency"


def _old_vllm(tmp_path: Path, version: str) -> str:
    data = yaml.safe_load(Path(EP_EXAMPLE).read_text(encoding="utf-8"))
    data["engine"] = {"base": "vllm", "version": version}
    return str(_write(tmp_path, f"vllm-{version}.yaml", yaml.safe_dump(data)))


@pytest.mark.parametrize("script", [
    "export VLLM_ALL2ALL_BACKEND=deepep_low_latency\n{cmd}\n",
    "VLLM_ALL2ALL_BACKEND=deepep_low_latency {cmd}\n",
    "env VLLM_ALL2ALL_BACKEND=deepep_low_latency {cmd}\n",
    "sh -c 'export VLLM_ALL2ALL_BACKEND=deepep_low_latency; {cmd}'\n",
])
def test_the_environment_variable_counts_for_the_releases_that_read_it(tmp_path: Path, script: str) -> None:
    cmd = VLLM.split(" --speculative-config")[0]  # speculation off: the exchange is priced all the same
    f = _write(tmp_path, "run.sh", script.format(cmd=cmd))
    old = _doc(_check(f, _old_vllm(tmp_path, "0.11.0")))  # deprecated there, still read
    assert old["config"]["ep_exchange"] == "deepep_low_latency"
    assert any("from VLLM_ALL2ALL_BACKEND deepep_low_latency" in n for n in old["notes"]), old["notes"]
    new = _check(f)  # vLLM 0.32.0 (the example's engine) no longer reads it: its default runs
    assert _doc(new)["config"]["ep_exchange"] == "allgather_reducescatter"
    assert "VLLM_ALL2ALL_BACKEND=deepep_low_latency" in new.stderr and "vllm-project/vllm#33535" in new.stderr


def test_the_flag_wins_over_the_environment_variable(tmp_path: Path) -> None:
    manifest = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
        "env": [{"name": "HF_HOME", "value": "/data"},
                {"name": "VLLM_ALL2ALL_BACKEND", "value": "deepep_low_latency"}],
        "args": ["deepseek-ai/DeepSeek-V4-Flash", "--data-parallel-size", "8", "--enable-expert-parallel",
                 "--all2all-backend", "allgather_reducescatter"]}]}}
    f = _write(tmp_path, "pod.yaml", yaml.safe_dump(manifest, sort_keys=False))
    conf = read_serving_config(str(f))
    assert conf.env["VLLM_ALL2ALL_BACKEND"] == ("deepep_low_latency", 10)  # the env entry's line
    res = _check(f, _old_vllm(tmp_path, "0.11.0"))
    assert _doc(res)["config"]["ep_exchange"] == "allgather_reducescatter"
    assert "is overridden by --all2all-backend allgather_reducescatter" in res.stderr


@pytest.mark.parametrize(("backend", "says"), [
    ("deepep_high_throughput", "DeepEP's high-throughput kernels are not priced"),
    ("pplx", "pplx removed by vllm-project/vllm#33724"),
    ("naive", "falls back to allgather_reducescatter"),
    ("mori_low_latency", "its dispatch and combine are not priced"),
    ("flashinfer_nvlink_one_sided", "its dispatch and combine are not priced"),
])
def test_a_backend_spectune_cannot_price_is_refused_in_one_line(tmp_path: Path, backend: str,
                                                                says: str) -> None:
    f = _write(tmp_path, "run.sh", f"# launch\n{VLLM} \\\n  --all2all-backend {backend}\n")
    res = _check(f)
    assert res.exit_code == 2 and res.stdout == ""
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith(f"spectune: error: {f}:2: --all2all-backend: '{backend}': ")
    assert says in line
    assert "spectune prices --all2all-backend allgather_reducescatter or deepep_low_latency" in line


@pytest.mark.parametrize("value", ["DeepEP", "deepep_low_latency;rm", "", "x" * 5000, "ｄｅｅｐｅｐ", "-1"])
def test_a_value_vllm_refuses_is_refused_whatever_the_model(tmp_path: Path, value: str) -> None:
    # the dense base profile: no exchange is priced, but vLLM would not start with it
    f = _write(tmp_path, "run.sh", f"vllm serve m --all2all-backend={json.dumps(value)}\n")
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", str(EXAMPLES / "ci" / "profile.yaml")])
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and "--all2all-backend: expected one of naive, pplx" in res.stderr
    assert len(res.stderr) < 1000  # the value is cut short, not echoed whole


@pytest.mark.parametrize("value", [["deepep_low_latency"], {"a": 1}, 3, True, None])
def test_a_config_file_value_of_the_wrong_type(tmp_path: Path, value: object) -> None:
    f = _write(tmp_path, "serve.yaml", "model: m\n" + yaml.safe_dump({"all2all-backend": value}))
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", str(EXAMPLES / "ci" / "profile.yaml")])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    where = re.escape(str(f))
    assert re.match(rf"spectune: error: {where}:[23]: --all2all-backend: expected one of", res.stderr)


def test_a_dense_or_unsharded_deployment_prices_no_exchange(tmp_path: Path) -> None:
    f = _write(tmp_path, "run.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct --all2all-backend pplx "
               "--speculative-config '{\"method\": \"eagle3\", \"model\": "
               "\"lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge\", \"num_speculative_tokens\": 2}'\n")
    doc = _doc(_check(f, str(EXAMPLES / "ci" / "profile.yaml")))
    assert doc["config"]["ep_exchange"] is None
    assert not any("expert-parallel exchange" in n for n in doc["notes"])


# --------------------------------------------------------------------------- SGLang
def test_each_sglang_backend_prices_its_own_exchange(tmp_path: Path, sglang_profile: str) -> None:
    cases = {"none": "", "deepep": " --moe-a2a-backend deepep",
             "deepep-ll": " --moe-a2a-backend deepep --deepep-mode low_latency",
             "legacy": " --enable-deepep-moe", "explicit-none": " --moe-a2a-backend none"}
    docs = {k: _doc(_check(_write(tmp_path, f"{k}.sh", SGLANG + v + "\n"), sglang_profile))
            for k, v in cases.items()}
    want = {"none": "allgather_reducescatter", "explicit-none": "allgather_reducescatter"}
    for k, doc in docs.items():
        assert doc["config"]["ep_exchange"] == want.get(k, "deepep_low_latency"), k
    assert _speedups(docs["none"]) != _speedups(docs["deepep"])
    assert _speedups(docs["none"]) == _speedups(docs["explicit-none"])
    assert _speedups(docs["deepep"]) == _speedups(docs["deepep-ll"]) == _speedups(docs["legacy"])
    assert any("--moe-a2a-backend deepep (line 1), --deepep-mode auto" in n for n in docs["deepep"]["notes"])


@pytest.mark.parametrize(("extra", "key", "says"), [
    ("--moe-a2a-backend deepep --deepep-mode normal", "--deepep-mode",
     "'normal': DeepEP's normal (high-throughput) kernels are not priced at decode"),
    ("--moe-a2a-backend mooncake", "--moe-a2a-backend",
     "'mooncake': its dispatch and combine are not priced"),
    ("--moe-a2a-backend pplx", "--moe-a2a-backend", "'pplx': its dispatch and combine are not priced"),
    ("--moe-a2a-backend deepep --deepep-mode turbo", "--deepep-mode",
     "expected one of auto, normal, low_latency (SGLang 0.5.23), got 'turbo'"),
    ("--moe-a2a-backend NONE", "--moe-a2a-backend", "expected one of none, deepep,"),
])
def test_sglang_settings_spectune_cannot_price(tmp_path: Path, sglang_profile: str, extra: str, key: str,
                                               says: str) -> None:
    f = _write(tmp_path, "run.sh", f"{SGLANG} {extra}\n")
    res = _check(f, sglang_profile)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith(f"spectune: error: {f}:1: {key}: ") and says in res.stderr


def test_without_data_parallelism_vllm_runs_no_backend(tmp_path: Path) -> None:
    # TP 8 / EP 8 / DP 1: vLLM builds no all2all manager (FusedMoEParallelConfig.use_all2all_kernels
    # needs dp > 1) and all-reduces the experts' output, whatever --all2all-backend says
    data = yaml.safe_load(Path(EP_EXAMPLE).read_text(encoding="utf-8"))
    data["parallelism"] = {"tp": 8, "ep": 8, "dp": 1}
    prof = str(_write(tmp_path, "tp8.yaml", yaml.safe_dump(data)))
    cmd = VLLM.replace("--data-parallel-size 8", "-tp 8")
    docs = [_doc(_check(_write(tmp_path, f"{b}.sh", f"{cmd} --all2all-backend {b}\n"), prof))
            for b in ("deepep_low_latency", "deepep_high_throughput", "allgather_reducescatter")]
    assert {d["config"]["ep_exchange"] for d in docs} == {"allgather_reducescatter"}
    assert _speedups(docs[0]) == _speedups(docs[1]) == _speedups(docs[2])
    assert any("no data parallelism: vLLM runs no --all2all-backend" in n for n in docs[1]["notes"])
