"""config.json features that change the step cost: priced, or refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from builders import DATA, profile
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.cost import step_cost
from spectune.core.deployment import Parallelism
from spectune.core.memory import parameter_counts
from spectune.core.model import DenseFFN, MoE
from spectune.documents.hf_config import infer_dtypes, model_from_hf_config
from spectune.documents.profiles import load_gpu


def cfg(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- published sizes
@pytest.mark.parametrize(("name", "total_b", "active_b", "rel"), [
    ("Llama-4-Maverick-17B-128E-Instruct", 400, 17, 0.03),  # Meta model card: 400B / 17B
    ("Llama-4-Scout-17B-16E-Instruct", 109, 17, 0.03),  # 109B / 17B (incl. ~1B vision encoder)
    ("DeepSeek-V3.2", 671, 37, 0.05),  # 671B main model (+14B MTP) / 37B activated
    ("Qwen3.5-35B-A3B", 35, 3, 0.20),  # "35B-A3B"
])
def test_parameter_counts_match_published(name: str, total_b: float, active_b: float,
                                          rel: float) -> None:
    total, active = parameter_counts(model_from_hf_config(cfg(name)))
    assert total / 1e9 == pytest.approx(total_b, rel=min(rel, 0.03))
    assert active / 1e9 == pytest.approx(active_b, rel=rel)


def test_maverick_interleaves_moe_with_dense_layers_and_a_shared_expert() -> None:
    c = cfg("Llama-4-Maverick-17B-128E-Instruct")["text_config"]
    m = model_from_hf_config(cfg("Llama-4-Maverick-17B-128E-Instruct"))
    moe = [g for g in m.layers for _ in range(g.count) if isinstance(g.ffn, MoE)]
    dense = [g for g in m.layers for _ in range(g.count) if isinstance(g.ffn, DenseFFN)]
    step = c["interleave_moe_layer_step"]
    assert len(moe) == c["num_hidden_layers"] // step and len(dense) == len(moe)
    ffn = moe[0].ffn
    assert isinstance(ffn, MoE) and ffn.n_shared == 1 and ffn.expert_intermediate == c["intermediate_size"]
    assert {g.ffn.intermediate for g in dense if isinstance(g.ffn, DenseFFN)} == {c["intermediate_size_mlp"]}
    # chunked local attention on 3 of 4 layers, priced as a window of attention_chunk_size
    swa = sum(g.count for g in m.layers if g.attention.kind == "swa")
    assert swa == 36 and {g.attention.window for g in m.layers if g.attention.kind == "swa"} == {8192}


def test_hybrid_linear_attention_is_priced_and_does_not_grow_with_context() -> None:
    m = model_from_hf_config(cfg("Qwen3.5-35B-A3B"))
    kinds = {g.attention.kind: 0 for g in m.layers}
    for g in m.layers:
        kinds[g.attention.kind] += g.count
    assert kinds == {"linear": 30, "gqa": 10}
    gpu = load_gpu("h100-sxm")
    short = step_cost(m, gpu, Parallelism(1), None, 8, 1, 4096)
    long = step_cost(m, gpu, Parallelism(1), None, 8, 1, 65536)
    lin_s = short.components["attention-linear"].seconds
    assert lin_s > 0 and long.components["attention-linear"].seconds == pytest.approx(lin_s)
    assert long.components["attention-gqa"].seconds > 4 * short.components["attention-gqa"].seconds


def test_v32_indexer_is_priced_and_attention_stops_at_top_k() -> None:
    m = model_from_hf_config(cfg("DeepSeek-V3.2"))
    assert {g.attention.kind for g in m.layers} == {"dsa"}
    gpu = load_gpu("h100-sxm")
    a = step_cost(m, gpu, Parallelism(1), None, 4, 1, 16_384)
    b = step_cost(m, gpu, Parallelism(1), None, 4, 1, 65_536)
    # MLA reads only index_topk = 2048 latents past the top-k; the indexer scores them all
    assert b.works["attention-dsa"].kv_bytes == pytest.approx(a.works["attention-dsa"].kv_bytes)
    ratio = b.works["indexer-dsa"].kv_bytes / a.works["indexer-dsa"].kv_bytes
    assert ratio == pytest.approx(4.0)
    v3 = model_from_hf_config(cfg("DeepSeek-V3"))
    v3_b = step_cost(v3, gpu, Parallelism(1), None, 4, 1, 65_536)
    assert b.works["attention-dsa"].kv_bytes < v3_b.works["attention-mla"].kv_bytes / 10


# --------------------------------------------------------------------------- quantization
@pytest.mark.parametrize(("extra", "weights", "kv"), [
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, "int4", "bf16"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4}}, "int4", "bf16"),
    ({"quantization_config": {"quant_method": "fp8"}}, "fp8", "bf16"),
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                              "kv_cache_quant_algo": "FP8"}}, "nvfp4", "fp8"),
    ({"hf_quant_config": {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}},
     "fp8", "fp8"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4, "type": "int"}}}}}, "int4", "bf16"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 8, "type": "float"}}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float"}}}, "fp8", "fp8"),
])
def test_quantization_forms(extra: dict[str, Any], weights: str, kv: str) -> None:
    d = infer_dtypes({**cfg("Llama-3.1-8B"), **extra})
    assert (d["weights"], d["kv_cache"]) == (weights, kv)
    m = model_from_hf_config({**cfg("Llama-3.1-8B"), **extra})
    assert m.weight_dtype == weights


def test_gpt_oss_mxfp4_experts() -> None:
    m = model_from_hf_config(cfg("gpt-oss-120b"))
    assert (m.weight_dtype, m.expert_dtype) == ("bf16", "mxfp4")


def test_hf_quant_config_file_beside_config_json(tmp_path: Path, runner: CliRunner) -> None:
    (tmp_path / "config.json").write_text(json.dumps(cfg("Llama-3.1-8B")))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}))
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(tmp_path / "config.json"),
                              "--batch", "1", "--context", "1", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    c = cfg("Llama-3.1-8B")
    embed_head = 2 * c["vocab_size"] * c["hidden_size"]  # kept in bf16 by ModelOpt FP8
    want = (doc["parameters_total"] - embed_head) * 1 + embed_head * 2
    assert doc["memory"]["weights_gb"] == pytest.approx(want / 1e9, rel=1e-3)


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(("extra", "named"), [
    ({"quantization_config": {"quant_method": "bitsandbytes"}}, "quantization_config.quant_method"),
    ({"hybrid_override_pattern": "M-M-M*-"}, "hybrid_override_pattern"),
    ({"layer_types": ["mamba"] * 32}, "layer_types[0]"),
    ({"quantization_config": {"quant_method": "awq", "bits": 3}}, "quantization_config.bits"),
])
def test_unmodelled_fields_exit_2_naming_them(tmp_path: Path, runner: CliRunner,
                                             extra: dict[str, Any], named: str) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**cfg("Llama-3.1-8B"), **extra}))
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                              "--context", "1"])
    assert res.exit_code == 2 and named in res.stderr and "Traceback" not in res.output


# --------------------------------------------------------------------------- parallelism
def test_tp_must_divide_the_attention_heads(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--tp", "64",
                              "--batch", "1", "--context", "1"])
    assert res.exit_code == 2 and "does not divide the 32 attention heads" in res.stderr
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(parallelism={"tp": 3})))
    res = runner.invoke(cli, ["recommend", str(f)])
    assert res.exit_code == 2 and "parallelism.tp" in res.stderr and "heads" in res.stderr


def test_kv_heads_replicate_when_tp_exceeds_them(runner: CliRunner) -> None:
    # Llama-3.1-8B: 32 heads, 8 KV heads; tp 16 puts one replicated KV head on each GPU.
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--tp", "16",
                              "--batch", "1", "--context", "1"])
    assert res.exit_code == 0, res.output


def test_ep_must_divide_the_experts(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(model={"hf_config": cfg("Qwen3-30B-A3B")},
                                        parallelism={"tp": 1, "dp": 3, "ep": 3})))
    res = runner.invoke(cli, ["recommend", str(f)])
    assert res.exit_code == 2 and "parallelism.ep" in res.stderr and "128 experts" in res.stderr
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(profile(model={"hf_config": cfg("Qwen3-30B-A3B")},
                                         parallelism={"tp": 1, "dp": 4, "ep": 4})))
    assert runner.invoke(cli, ["recommend", str(ok)]).exit_code == 0


def test_grid_shapes_are_unchanged_by_new_kinds() -> None:
    m = model_from_hf_config(cfg("Qwen3.5-35B-A3B"))
    c = step_cost(m, load_gpu("h100-sxm"), Parallelism(2), None, np.array([[1], [8]]), 1,
                  np.array([[1024, 8192]]))
    assert np.shape(c.seconds) == (2, 2)


def test_unknown_family_is_priced_with_a_warning_naming_it(tmp_path: Path, runner: CliRunner) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**cfg("Llama-3.1-8B"), "model_type": "brand_new"}))
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                              "--context", "1"])
    assert res.exit_code == 0 and "warning" in res.stderr and "model_type 'brand_new'" in res.stderr
    quiet = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1",
                                "--context", "1"])
    assert "warning" not in quiet.stderr


def test_tied_embeddings_are_one_tensor() -> None:
    from spectune.core.memory import weight_bytes

    c = cfg("Llama-3.1-8B")
    untied = model_from_hf_config(c)
    tied = model_from_hf_config({**c, "tie_word_embeddings": True})
    table = c["vocab_size"] * c["hidden_size"]
    assert parameter_counts(untied)[0] - parameter_counts(tied)[0] == table
    assert weight_bytes(untied, Parallelism(1)) - weight_bytes(tied, Parallelism(1)) == 2 * table


@pytest.mark.parametrize(("name", "file"), [
    ("llama-4-maverick", "Llama-4-Maverick-17B-128E-Instruct"),
    ("qwen3.5-35b-a3b", "Qwen3.5-35B-A3B"),
    ("deepseek-v3.2", "DeepSeek-V3.2"),
])
def test_builtin_profiles_match_their_config_json(name: str, file: str) -> None:
    from spectune.documents.profiles import load_model

    built, raw = load_model(name), model_from_hf_config(cfg(file))
    assert built.layers == raw.layers and parameter_counts(built) == parameter_counts(raw)


def test_malformed_quantization_config_exits_2(tmp_path: Path, runner: CliRunner) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**cfg("Llama-3.1-8B"), "quantization_config": "fp8"}))
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                              "--context", "1"])
    assert res.exit_code == 2 and "quantization_config" in res.stderr and "Traceback" not in res.output


def test_linear_attention_reads_its_state_once_and_writes_one_per_token() -> None:
    m = model_from_hf_config(cfg("Qwen3.5-35B-A3B"))
    gpu = load_gpu("h100-sxm")
    att = next(g.attention for g in m.layers if g.attention.kind == "linear")
    state = att.n_heads * att.key_dim * att.head_dim * 4  # fp32, tp 1
    for T in (1, 4):
        w = step_cost(m, gpu, Parallelism(1), None, 8, T, 4096).works["attention-linear"]
        assert float(w.kv_bytes) == pytest.approx(30 * 8 * (1 + T) * state)
