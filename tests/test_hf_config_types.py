"""config.json fields of the wrong type (issue 19 item 3): every field spectune reads is
checked for its type, and a wrong one is said in words -- `config.json architectures:
expected a list of names, got 3` -- with exit 2, never a raw Python message ("can only join
an iterable", "'int' object is not iterable") and never exit 70.

Real configs (tests/data) are the starting points; each field spectune reads is replaced
by values of every JSON type, one at a time (a sweep) and several at a time (hypothesis)."""

from __future__ import annotations

import copy
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.documents.hf_config import UNMODELLED, model_from_hf_config
from spectune.documents.profiles import load_model

DATA = Path(__file__).parent / "data"
BASES = sorted(f for f in DATA.glob("*.json") if f.name != "sglang_spec_args.json")

#: Every config.json field spectune.documents.hf_config reads.
FIELDS = (
    "architectures", "model_type", "torch_dtype", "dtype", "expert_dtype", "hidden_size",
    "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers", "vocab_size",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank",
    "index_n_heads", "index_head_dim", "index_topk", "n_routed_experts", "num_experts",
    "num_local_experts", "num_experts_per_tok", "experts_per_token", "moe_intermediate_size",
    "intermediate_size", "n_shared_experts", "shared_expert_intermediate_size", "o_lora_rank",
    "o_groups", "sliding_window", "compress_ratios", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_ssm_dtype",
    "layer_types", "full_attention_interval", "attention_chunk_size", "no_rope_layers",
    "use_sliding_window", "moe_layers", "first_k_dense_replace", "mlp_only_layers",
    "interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq", "attn_output_gate",
    "intermediate_size_mlp", "draft_vocab_size", "tie_word_embeddings", "_name_or_path",
    "quantization_config", "text_config", *UNMODELLED,
    # Gemma-3 / Gemma-4 (spectune.documents.hf_gemma)
    "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "num_kv_shared_layers",
    "hidden_size_per_layer_input", "use_bidirectional_attention", "enable_moe_block", "top_k_experts",
    "sliding_window_pattern",
)
#: quantization_config fields, read under each method that reads them.
QUANT_FIELDS = ("quant_method", "fmt", "quant_algo", "kv_cache_quant_algo", "bits", "w_bit",
                "config_groups", "kv_cache_scheme")
QUANT_METHODS = ("fp8", "modelopt", "awq", "gptq", "compressed-tensors")
#: One value of each JSON type, and the shapes that broke a reader once.
VALUES: tuple[Any, ...] = (3, 0, 2.5, 10**30, "x", True, None, [], [3], ["x"], [[1]], {}, {"a": 1},
                           {"weights": 3})
#: Words of CPython's own errors: none may reach the user.
RAW = ("object is not", "can only", "invalid literal", "not iterable", "not subscriptable",
       "has no attribute", "unhashable", "by zero", "index out of range", "unsupported operand",
       "NoneType", "argument must be", "not supported between")


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    """The mapping spectune reads the model's fields from (text_config for multimodal configs)."""
    inner = cfg.get("text_config")
    return inner if isinstance(inner, dict) and "hidden_size" not in cfg else cfg


def with_field(base: Path, key: str, value: Any, quant_method: str | None = None) -> dict[str, Any]:
    cfg = json.loads(base.read_text())
    if quant_method is not None:
        cfg["quantization_config"] = {"quant_method": quant_method, key: copy.deepcopy(value)}
    elif key in ("quantization_config", "text_config"):
        cfg[key] = copy.deepcopy(value)
    else:
        effective(cfg)[key] = copy.deepcopy(value)
    return cfg


def outcome(cfg: dict[str, Any], folder: Path) -> str:
    """'ok', or the message of the InputError; any other exception fails the test."""
    f = folder / "config.json"
    f.write_text(json.dumps(cfg))
    try:
        load_model(str(f))
    except InputError as err:
        msg = err.message
        assert "\n" not in msg, msg
        assert not any(w in msg for w in RAW), msg
        return msg
    return "ok"


def test_a_number_where_a_list_of_names_is_expected_is_said_in_words(tmp_path: Path) -> None:
    base = DATA / "Llama-3.1-8B.json"
    for key in ("architectures", "layer_types"):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(with_field(base, key, 3)))
        res = CliRunner().invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                                       "--context", "8"])
        assert res.exit_code == 2, res.output
        assert res.stderr == f"spectune: error: {f}: config.json {key}: expected a list of names, got 3\n"


@pytest.mark.parametrize(("key", "value", "says"), [
    ("text_config", 3, "config.json text_config: expected a mapping, got 3"),
    ("compress_ratios", 5, "config.json compress_ratios: expected a list of whole numbers, got 5"),
    ("linear_conv_kernel_dim", "4", "config.json linear_conv_kernel_dim: expected a whole number, got '4'"),
    ("moe_layers", ["a"], "config.json moe_layers[0]: expected a whole number, got 'a'"),
    ("use_sliding_window", "no", "config.json use_sliding_window: expected true or false, got 'no'"),
    ("model_type", ["llama"], "config.json model_type: expected text, got ['llama']"),
    ("full_attention_interval", 0.5, "config.json full_attention_interval: expected a whole number, got 0.5"),
])
def test_each_kind_of_field_says_what_it_expected(key: str, value: Any, says: str) -> None:
    base = {"compress_ratios": "DeepSeek-V4-Flash", "linear_conv_kernel_dim": "Qwen3.5-35B-A3B"}
    cfg = json.loads((DATA / f"{base.get(key, 'Mixtral-8x7B-v0.1')}.json").read_text())  # Mixtral: a MoE
    effective(cfg)[key] = value
    if key == "text_config":  # read when the top level has no sizes
        del cfg["hidden_size"]
        cfg["text_config"] = value
    with pytest.raises(ValueError) as err:
        model_from_hf_config(cfg)
    assert str(err.value) == says


def test_no_rope_layers_shorter_than_the_model(tmp_path: Path) -> None:
    cfg = json.loads((DATA / "Llama-4-Scout-17B-16E-Instruct.json").read_text())
    effective(cfg)["no_rope_layers"] = [1, 1]
    assert outcome(cfg, tmp_path).endswith("config.json no_rope_layers has 2 entries for 48 layers")


def test_quantization_fields_of_the_wrong_type(tmp_path: Path) -> None:
    base = DATA / "Llama-3.1-8B.json"
    assert outcome(with_field(base, "config_groups", [1], "compressed-tensors"), tmp_path).endswith(
        "config.json quantization_config.config_groups: expected a mapping, got [1]")
    assert outcome(with_field(base, "bits", "four", "awq"), tmp_path).endswith(
        "config.json quantization_config.bits: expected a whole number, got 'four'")


def test_sweep_every_field_every_type_of_every_config(tmp_path: Path) -> None:
    """Each field, each value, each real config: read, or refused in words (exit 2)."""
    seen: Counter[str] = Counter()
    for base in BASES:
        for key in FIELDS:
            for value in VALUES:
                seen["ok" if outcome(with_field(base, key, value), tmp_path) == "ok" else "refused"] += 1
    for method in QUANT_METHODS:
        for key in QUANT_FIELDS:
            for value in VALUES:
                seen["ok" if outcome(with_field(BASES[0], key, value, method), tmp_path) == "ok"
                     else "refused"] += 1
    total = len(BASES) * len(FIELDS) * len(VALUES) + len(QUANT_METHODS) * len(QUANT_FIELDS) * len(VALUES)
    assert sum(seen.values()) == total
    assert seen["ok"] > 1000 and seen["refused"] > 3000, seen  # both outcomes exercised


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-10**25, 10**25)
                       | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=3),
                       max_leaves=6)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(base=st.sampled_from(BASES),
       edits=st.lists(st.tuples(st.sampled_from(FIELDS), JSONISH | st.sampled_from(VALUES)),
                      min_size=1, max_size=4))
def test_any_config_json_gives_exit_0_or_2_through_the_command_line(
        base: Path, edits: list[tuple[str, Any]]) -> None:
    cfg = json.loads(base.read_text())
    for key, value in edits:
        if key in ("quantization_config", "text_config"):
            cfg[key] = value
        else:
            effective(cfg)[key] = value
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "config.json"
        f.write_text(json.dumps(cfg))
        res = CliRunner().invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(f), "--batch", "1",
                                       "--context", "8", "--tp", "8"])
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 2), (res.exit_code, res.output)
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("spectune: error: "), res.stderr
        assert not any(w in lines[0] for w in RAW), lines[0]
        if "config.json " in lines[0]:  # a field's problem names the file (others: e.g. tp vs heads)
            assert lines[0].startswith(f"spectune: error: {f}: "), lines[0]
