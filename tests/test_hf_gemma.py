"""Gemma-4 interleaved attention imported exactly from config.json (issue 21 item 5): sliding
and global layer groups keep their own KV heads and head size, in the model, the KV cache
and the attention cost; variants spectune does not price are refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.cost.attention import attention_work
from spectune.core.deployment import Parallelism
from spectune.core.memory import cache_bytes_per_sequence, parameter_counts
from spectune.core.model import DenseFFN, Model, MoE
from spectune.documents.hf_config import model_from_hf_config
from spectune.documents.profiles import load_model

DATA = Path(__file__).parent / "data"
DENSE = "Gemma-4-31B-IT-NVFP4"  # nvidia's NVFP4 release of google/gemma-4-31B-it (tests/data/README.md)
SPARSE = "gemma-4-26B-A4B"  # google/gemma-4-26B-A4B


def raw(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


def text(cfg: dict[str, Any]) -> dict[str, Any]:
    inner: dict[str, Any] = cfg["text_config"]
    return inner


def groups(m: Model) -> dict[str, tuple[int, int, int, int]]:
    """kind -> (layers, KV heads, head size, window) of each distinct attention."""
    return {g.attention.kind: (g.count, g.attention.n_kv_heads, g.attention.head_dim, g.attention.window)
            for g in m.distinct_layers()}


@pytest.mark.parametrize("name", [DENSE, SPARSE])
def test_each_layer_group_has_the_kv_heads_and_head_size_of_the_config(name: str) -> None:
    cfg = raw(name)
    t = text(cfg)
    types = t["layer_types"]
    m = model_from_hf_config(cfg, name)
    assert groups(m) == {
        "swa": (types.count("sliding_attention"), t["num_key_value_heads"], t["head_dim"],
                t["sliding_window"]),
        "gqa": (types.count("full_attention"), t["num_global_key_value_heads"], t["global_head_dim"], 0),
    }
    assert m.notes == ()  # a family spectune knows: no "priced as a plain transformer" warning


def test_the_31b_is_sliding_16x256_and_global_4x512() -> None:
    m = model_from_hf_config(raw(DENSE), DENSE)
    assert groups(m) == {"swa": (50, 16, 256, 1024), "gqa": (10, 4, 512, 0)}
    assert all(isinstance(g.ffn, DenseFFN) and g.ffn.intermediate == 21504 for g in m.layers)


def test_kv_bytes_per_token_by_hand_from_the_config() -> None:
    # bf16 cache (2 bytes); K and V each; sliding layers stop at their 1024-token window.
    m = model_from_hf_config(raw(DENSE), DENSE, {"kv_cache": "bf16"})
    S = 8192
    sliding = 50 * 2 * 16 * 256 * 2 * 1024  # 50 layers x (K+V) x 16 heads x 256 x 2 B x window
    full = 10 * 2 * 4 * 512 * 2 * S  # 10 layers x (K+V) x 4 heads x 512 x 2 B x context
    assert sliding + full == 1_509_949_440
    assert float(cache_bytes_per_sequence(m, Parallelism(), S)) == sliding + full
    # tp 8: the 16 sliding KV heads split 2 per GPU; the 4 global ones replicate (1 per GPU)
    tp8 = 50 * 2 * 2 * 256 * 2 * 1024 + 10 * 2 * 1 * 512 * 2 * S
    assert float(cache_bytes_per_sequence(m, Parallelism(tp=8), S)) == tp8


def test_attention_cost_reads_each_groups_own_cache() -> None:
    m = model_from_hf_config(raw(DENSE), DENSE, {"kv_cache": "bf16"})
    by_kind = {g.attention.kind: g.attention for g in m.distinct_layers()}
    S, B = 4096.0, 8.0
    full = attention_work(by_kind["gqa"], m, Parallelism(), B, 1.0, S)["attention-gqa"]
    # read: 8 sequences x S x (K+V) x 4 heads x 512 x 2 B; write: one token of the same
    assert float(full.kv_bytes) == B * (S + 1) * 2 * 4 * 512 * 2
    assert float(full.flops) == B * 4.0 * 32 * 512 * S  # 32 query heads of 512 over S keys
    swa = attention_work(by_kind["swa"], m, Parallelism(), B, 1.0, S)["attention-swa"]
    assert float(swa.kv_bytes) == B * (1024 + 1) * 2 * 16 * 256 * 2


@pytest.mark.parametrize(("name", "total_b", "active_b"), [
    (DENSE, 30.7, 30.7),  # Gemma 4 model card: 31B dense, 30.7B parameters
    (SPARSE, 25.2, 3.8),  # Gemma 4 model card: 26B A4B, 25.2B total / 3.8B active (8 of 128 + shared)
])
def test_parameter_counts_match_the_model_card(name: str, total_b: float, active_b: float) -> None:
    total, active = parameter_counts(model_from_hf_config(raw(name), name))
    assert total / 1e9 == pytest.approx(total_b, rel=0.02)
    assert active / 1e9 == pytest.approx(active_b, rel=0.02)


def test_the_moe_block_runs_beside_a_dense_mlp() -> None:
    t = text(raw(SPARSE))
    ffn = model_from_hf_config(raw(SPARSE)).layers[0].ffn
    assert ffn == MoE(t["num_experts"], t["top_k_experts"], t["moe_intermediate_size"], 1,
                      t["intermediate_size"])
    off = raw(SPARSE)
    text(off)["enable_moe_block"] = False  # experts listed but switched off: a dense model
    assert not model_from_hf_config(off).is_moe


def test_without_k_eq_v_global_layers_keep_the_sliding_kv_heads() -> None:
    # transformers Gemma4TextConfig: num_global_key_value_heads applies only with attention_k_eq_v
    cfg = raw(DENSE)
    text(cfg)["attention_k_eq_v"] = False
    assert groups(model_from_hf_config(cfg))["gqa"] == (10, 16, 512, 0)


def test_layer_types_absent_is_five_sliding_to_one_full_and_the_last_layer_is_full() -> None:
    cfg = raw(DENSE)
    del text(cfg)["layer_types"]
    text(cfg)["num_hidden_layers"] = 62  # 62 = 6 * 10 + 2: the last layer forced full
    assert groups(model_from_hf_config(cfg)) == {"swa": (51, 16, 256, 1024), "gqa": (11, 4, 512, 0)}


def test_gemma3_reads_its_legacy_sliding_window_pattern() -> None:
    cfg = {"model_type": "gemma3_text", "hidden_size": 1024, "num_attention_heads": 8,
           "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 12, "vocab_size": 1000,
           "intermediate_size": 4096, "sliding_window": 512, "sliding_window_pattern": 3}
    assert groups(model_from_hf_config(cfg)) == {"swa": (8, 4, 128, 512), "gqa": (4, 4, 128, 0)}


@pytest.mark.parametrize(("key", "value"), [
    ("num_kv_shared_layers", 20),  # Gemma-4 E2B / E4B: later layers reuse earlier KV caches
    ("hidden_size_per_layer_input", 256),  # Gemma-4 E2B / E4B: per-layer embeddings
    ("use_bidirectional_attention", "all"),
])
def test_an_unmodelled_variant_is_refused_naming_file_and_key(key: str, value: Any, tmp_path: Path) -> None:
    cfg = raw(DENSE)
    text(cfg)[key] = value
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    with pytest.raises(InputError) as err:
        load_model(str(f))
    assert str(f) in str(err.value) and f"config.json {key}: " in err.value.message
    res = CliRunner().invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                                   "--context", "8"])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"spectune: error: {f}: config.json {key}: "), res.stderr


def test_the_cli_prices_both_groups(tmp_path: Path) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps(raw(DENSE)))
    res = CliRunner().invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "8",
                                   "--context", "8192", "--tp", "2", "-o", "json"])
    assert res.exit_code == 0, res.output
    components = json.loads(res.stdout)["components"]
    names = [c["name"] for c in components]
    assert "attention-swa" in names and "attention-gqa" in names


def test_the_nvfp4_release_caches_kv_in_fp8_as_its_config_json_says() -> None:
    # quantization_config (ModelOpt, flat form): quant_algo NVFP4, kv_cache_scheme {float, 8 bits};
    # vLLM's ModelOpt config reads an FP8 KV cache from it (no hf_quant_config.json needed)
    m = model_from_hf_config(raw(DENSE), DENSE)
    assert (m.weight_dtype, m.kv_dtype) == ("nvfp4", "fp8")
    S = 8192
    one_byte = 50 * 2 * 16 * 256 * 1 * 1024 + 10 * 2 * 4 * 512 * 1 * S
    assert float(cache_bytes_per_sequence(m, Parallelism(), S)) == one_byte
