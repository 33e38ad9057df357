"""Memory feasibility: per-GPU bytes from first principles, recommend's infeasible points and
exit 2 when the weights alone do not fit, cost's memory object."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from builders import DATA, GPU, profile
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.deployment import Parallelism
from spectune.core.memory import (
    MEMORY_UTILIZATION,
    cache_bytes_per_sequence,
    memory,
    parameter_counts,
    weight_bytes,
)
from spectune.core.model import Drafter, MoE
from spectune.documents.hf_config import model_from_hf_config
from spectune.documents.profiles import examples_dir, load_deployment, load_gpu, load_model

NGRAM = Drafter("ngram", "ngram")


def model(name: str):  # type: ignore[no-untyped-def]
    return model_from_hf_config(json.loads((DATA / f"{name}.json").read_text()), name)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- weights
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_dense_weights_are_params_times_bytes_over_tp(tp: int) -> None:
    m = model("Llama-3.1-70B")  # bf16, untied embedding and head
    assert weight_bytes(m, Parallelism(tp)) == pytest.approx(m.total_params() * 2 / tp, rel=1e-12)


def test_expert_parallel_holds_its_share_of_experts_and_all_the_rest() -> None:
    m = model("Qwen3-30B-A3B")  # 128 experts, bf16
    h = m.hidden_size
    routed = sum(g.count * g.ffn.n_experts * g.ffn.expert_params(h) for g in m.layers
                 if isinstance(g.ffn, MoE))
    rest = m.total_params() - routed
    assert weight_bytes(m, Parallelism(tp=1, ep=4, dp=4)) == pytest.approx(2 * (rest + routed / 4))
    assert weight_bytes(m, Parallelism(tp=4)) == pytest.approx(2 * (rest + routed) / 4)


def test_parameter_counts_active_uses_top_k_experts() -> None:
    m = model("Qwen3-30B-A3B")
    total, active = parameter_counts(m)
    h = m.hidden_size
    moe = m.layers[0].ffn
    assert isinstance(moe, MoE)
    unused = m.n_layers * (moe.n_experts - moe.top_k) * moe.expert_params(h)
    assert total == m.total_params() and active == total - unused


# --------------------------------------------------------------------------- KV cache by kind
def test_gqa_kv_per_token_and_replication_past_the_kv_heads() -> None:
    m = model("Llama-3.1-8B")  # 32 layers, 8 KV heads of 128, bf16
    per_token = 32 * 2 * 8 * 128 * 2
    assert cache_bytes_per_sequence(m, Parallelism(1), 1000) == pytest.approx(1000 * per_token)
    assert cache_bytes_per_sequence(m, Parallelism(4), 1000) == pytest.approx(1000 * per_token / 4)
    # tp 16 > 8 KV heads: each GPU keeps one whole KV head (replicated), not half of one.
    assert cache_bytes_per_sequence(m, Parallelism(16), 1000) == pytest.approx(1000 * per_token / 8)


def test_sliding_window_layers_stop_growing_at_the_window() -> None:
    m = model("gpt-oss-120b")  # 18 sliding (window 128) + 18 full layers, 8 KV heads of 64
    full_per_token = 18 * 2 * 8 * 64 * 2
    grow = cache_bytes_per_sequence(m, Parallelism(1), 20_000) - cache_bytes_per_sequence(
        m, Parallelism(1), 10_000)
    assert grow == pytest.approx(10_000 * full_per_token)
    at_window = cache_bytes_per_sequence(m, Parallelism(1), 128)
    assert at_window == pytest.approx(128 * 2 * full_per_token)


def test_mla_latent_is_whole_on_every_tp_rank() -> None:
    m = model("DeepSeek-V3")  # 61 layers, latent 512 + rope 64, fp8-quantized weights, bf16 cache
    per_token = 61 * (512 + 64) * 2
    for tp in (1, 8):
        assert cache_bytes_per_sequence(m, Parallelism(tp), 4096) == pytest.approx(4096 * per_token)


def test_dsa_adds_the_indexer_key_per_token() -> None:
    m = model("DeepSeek-V3.2")
    per_token = 61 * ((512 + 64) * 2 + 128 * (1 + 4 / 128))
    assert cache_bytes_per_sequence(m, Parallelism(1), 4096) == pytest.approx(4096 * per_token)


def test_linear_attention_state_does_not_grow_with_context() -> None:
    m = model("Qwen3.5-35B-A3B")  # 30 gated-DeltaNet + 10 full-attention layers (2 KV heads of 256)
    par = Parallelism(1)
    grow = cache_bytes_per_sequence(m, par, 20_000) - cache_bytes_per_sequence(m, par, 10_000)
    assert grow == pytest.approx(10_000 * 10 * 2 * 2 * 256 * 2)  # only the full layers grow
    # at no context at all, the 30 recurrent states are already there: 32 value heads x
    # 128 x 128 in fp32 each, plus the conv window (3 taps of 2*16*128 + 32*128 channels, bf16)
    state = 30 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)
    assert cache_bytes_per_sequence(m, par, 0) == pytest.approx(state)


def test_total_is_the_sum_and_reserve_keeps_the_unused_fraction() -> None:
    m = model("Llama-3.1-8B")
    gpu = load_gpu("h100-sxm")
    mem = memory(m, NGRAM, gpu, Parallelism(1), np.array([[1], [64]]), np.array([[2048, 32768]]))
    assert mem.reserve >= (1 - MEMORY_UTILIZATION) * gpu.memory_bytes
    kv = np.array([[1], [64]]) * cache_bytes_per_sequence(m, Parallelism(1), [[2048, 32768]])
    assert np.allclose(mem.kv_cache, kv)
    assert np.allclose(mem.total, mem.weights + kv + mem.reserve)
    assert mem.feasible.tolist() == [[True, True], [True, False]]


# --------------------------------------------------------------------------- the CLI
def _write(tmp_path: Path, **over: object) -> Path:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(**over)))
    return f


def test_70b_bf16_on_one_h100_exits_2_naming_memory(runner: CliRunner, tmp_path: Path) -> None:
    f = _write(tmp_path, gpu="h100-sxm", model="llama-3.1-70b", parallelism={"tp": 1})
    gpu, m = load_gpu("h100-sxm"), load_model("llama-3.1-70b")
    need = memory(m, NGRAM, gpu, Parallelism(1), 1, 1).fixed
    fits = [tp for tp in (1, 2, 4, 8) if memory(m, NGRAM, gpu, Parallelism(tp), 1, 1).weights_fit]
    for args in (["recommend", str(f)], ["emit", str(f), "vllm"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, res.output
        err = res.stderr.strip()
        assert len(err.splitlines()) == 1 and "memory" in err
        assert f"{need / 1e9:.1f} GB needed" in err and f"{gpu.memory_bytes / 1e9:.1f} GB available" in err
        assert f"smallest tp that fits is {fits[0]}" in err
    assert need > gpu.memory_bytes == 80 * 2**30  # 141 GB of bf16 weights; "80 GB" is 80 GiB
    serve = tmp_path / "serve.sh"
    serve.write_text("vllm serve meta-llama/Llama-3.1-70B --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":3}'\n")
    res = runner.invoke(cli, ["check", str(serve), "--profile", str(f)])
    assert res.exit_code == 2 and "memory" in res.stderr


def test_cost_still_prices_what_does_not_fit(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-70b",
                              "--batch", "1", "--context", "1024", "-o", "json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    mem = doc["memory"]
    assert mem["feasible"] is False and mem["capacity_gb"] == pytest.approx(80 * 2**30 / 1e9, rel=1e-3)
    assert mem["weights_gb"] == pytest.approx(doc["parameters_total"] * 2 / 1e9, rel=1e-3)
    assert mem["total_gb"] == pytest.approx(mem["weights_gb"] + mem["kv_cache_gb"]
                                            + mem["reserve_gb"], rel=1e-3)
    assert doc["total_seconds"] > 0 and "does not fit" in res.stderr
    ok = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4",
                             "--batch", "1", "--context", "1024", "-o", "json"])
    assert json.loads(ok.stdout)["memory"]["feasible"] is True and "does not fit" not in ok.stderr


def test_recommend_marks_points_that_do_not_fit(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["recommend", "llama-3.1-70b-h100-eagle3", "-o", "json"])
    doc = json.loads(res.stdout)
    dep = load_deployment("llama-3.1-70b-h100-eagle3")
    for p in doc["points"]:
        mem = memory(dep.model, dep.drafter, dep.gpu, dep.parallelism, p["batch"], p["context"])
        assert p["feasible"] == bool(mem.feasible), p
        if not p["feasible"]:
            assert "gamma" not in p and "speedup" not in p and "available" in p["reason"]
    # the case: 32k context at batch >= 64 needs more KV cache than 4 x H100 hold
    assert not any(p["feasible"] for p in doc["points"] if p["context"] == 32768 and p["batch"] >= 64)
    table = runner.invoke(cli, ["recommend", "llama-3.1-70b-h100-eagle3"]).stdout
    row = next(line for line in table.splitlines() if line.startswith("256 "))
    assert row.split()[1:] == ["—", "[1]"] * 3
    assert "[1] does not fit in GPU memory" in table


@pytest.mark.parametrize("example", sorted(p.stem for p in examples_dir().glob("*.yaml")))
def test_every_example_fits_at_its_smallest_point(example: str) -> None:
    dep = load_deployment(example)
    b, s = min(dep.workload.batch_sizes), min(dep.workload.context_lengths)
    assert bool(memory(dep.model, dep.drafter, dep.gpu, dep.parallelism, b, s).feasible)


def test_readme_commands_fit(runner: CliRunner) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"spectune recommend (examples/[\w.-]+\.yaml)", readme))
    assert shown
    for ex in shown:
        res = runner.invoke(cli, ["recommend", Path(ex).stem, "-o", "json"])
        assert res.exit_code == 0 and json.loads(res.stdout)["points"][0]["feasible"], ex


def test_big_gpu_profile_fits_more(runner: CliRunner, tmp_path: Path) -> None:
    small = _write(tmp_path, workload={"batch_sizes": [64], "context_lengths": [32768]})
    doc = json.loads(runner.invoke(cli, ["recommend", str(small), "-o", "json"]).stdout)
    assert doc["points"][0]["feasible"] is False
    big = _write(tmp_path, gpu={**GPU, "memory_gb": 1000},
                 workload={"batch_sizes": [64], "context_lengths": [32768]})
    doc = json.loads(runner.invoke(cli, ["recommend", str(big), "-o", "json"]).stdout)
    assert doc["points"][0]["feasible"] is True and "gamma" in doc["points"][0]



def test_speedup_warns_when_the_point_does_not_fit(runner: CliRunner) -> None:
    base = ["speedup", "--gpu", "h100-sxm", "--drafter", "ngram", "--alpha", "0.6", "--gamma", "3",
            "--batch", "16", "--context", "4096"]
    big = runner.invoke(cli, [*base, "--model", "llama-3.1-70b"])
    assert big.exit_code == 0 and "does not fit in memory" in big.stderr
    ok = runner.invoke(cli, [*base, "--model", "llama-3.1-8b"])
    assert ok.exit_code == 0 and "does not fit" not in ok.stderr


def test_documents_with_points_that_do_not_fit_validate(runner: CliRunner) -> None:
    import jsonschema

    from spectune.documents.schema import SCHEMAS

    doc = json.loads(runner.invoke(cli, ["recommend", "llama-3.1-70b-h100-eagle3", "-o", "json"]).stdout)
    assert any(not p["feasible"] for p in doc["points"])
    jsonschema.validate(doc, SCHEMAS["Recommendation"])
    cost = json.loads(runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-70b",
                                          "--batch", "1", "--context", "8", "-o", "json"]).stdout)
    jsonschema.validate(cost, SCHEMAS["StepCost"])


def test_linear_attention_keeps_a_state_per_draft_position() -> None:
    m = model("Qwen3.5-35B-A3B")
    par = Parallelism(1)
    plain = cache_bytes_per_sequence(m, par, 0)
    # vLLM keeps 1 + num_speculative_tokens state slots per request (num_speculative_blocks)
    assert cache_bytes_per_sequence(m, par, 0, spec_tokens=3) == pytest.approx(4 * plain)
    full = model("Llama-3.1-8B")  # no linear layers: nothing changes
    assert cache_bytes_per_sequence(full, par, 4096, spec_tokens=3) == pytest.approx(
        cache_bytes_per_sequence(full, par, 4096))
