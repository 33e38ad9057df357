"""config.json import: real configs of every supported family, checked against the
parameter counts their publishers state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectune.documents.hf_config import infer_dtypes, model_from_hf_config

DATA = Path(__file__).parent / "data"

# Total parameters as published (model cards / papers), billions.
PUBLISHED = {
    "DeepSeek-V3": 671,  # DeepSeek-V3 technical report: 671B total
    "DeepSeek-V4-Flash": 284,  # DeepSeek-V4 release: 284B total
    "Kimi-K2-Instruct": 1040,  # Kimi K2 model card: 1T total (1.04T)
    "Llama-3.1-70B": 70.6,  # Llama 3.1 model card
    "Llama-3.1-8B": 8.03,
    "Mixtral-8x7B-v0.1": 46.7,  # Mistral AI: 46.7B total
    "Qwen3-30B-A3B": 30.5,  # Qwen3 model card: 30.5B
    "Qwen3-235B-A22B": 235,  # Qwen3 model card
    "gpt-oss-120b": 117,  # OpenAI gpt-oss model card: 117B
}


def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_publisher(name: str) -> None:
    model = model_from_hf_config(load(name), name)
    assert model.total_params() / 1e9 == pytest.approx(PUBLISHED[name], rel=0.03)


def test_deepseek_v3_layers_mla_and_moe() -> None:
    m = model_from_hf_config(load("DeepSeek-V3"))
    dense, moe = m.layers
    assert (dense.count, moe.count) == (3, 58)  # first_k_dense_replace = 3
    assert moe.attention.kind == "mla" and moe.attention.kv_lora_rank == 512
    assert moe.ffn.n_experts == 256 and moe.ffn.top_k == 8 and moe.ffn.n_shared == 1
    assert (m.weight_dtype, m.expert_dtype) == ("fp8", "fp8")


def test_deepseek_v4_flash_attention_layout() -> None:
    m = model_from_hf_config(load("DeepSeek-V4-Flash"))
    kinds = [g.attention.kind for g in m.layers for _ in range(g.count)]
    assert len(kinds) == 43
    # 44 ratios for 43 layers: the last one is the MTP layer's (num_nextn_predict_layers = 1)
    assert kinds.count("csa") == 21 and kinds.count("hca") == 20 and kinds.count("swa") == 2
    hca = next(g.attention for g in m.layers if g.attention.kind == "hca")
    assert (hca.compress_ratio, hca.kv_lora_rank, hca.rope_dim, hca.n_heads) == (128, 512, 64, 64)
    csa = next(g.attention for g in m.layers if g.attention.kind == "csa")
    assert (csa.compress_ratio, csa.index_topk, csa.index_n_heads, csa.index_head_dim) == (4, 512, 64, 128)
    assert m.expert_dtype == "mxfp4"  # expert_dtype: fp4, natively MXFP4 (seed 000)


def test_gpt_oss_alternates_sliding_and_full_attention() -> None:
    m = model_from_hf_config(load("gpt-oss-120b"))
    kinds = [g.attention.kind for g in m.layers for _ in range(g.count)]
    assert kinds[:4] == ["swa", "gqa", "swa", "gqa"] and len(kinds) == 36
    assert m.layers[0].attention.window == 128
    assert (m.weight_dtype, m.expert_dtype) == ("bf16", "mxfp4")


def test_eagle3_head_uses_draft_vocab_and_double_width_input() -> None:
    m = model_from_hf_config(load("eagle3-draft--specforge-llama3-70B-ealge3"))
    assert m.n_layers == 1 and m.head_vocab == 32000
    h, d = 8192, 128
    plain = h * 64 * d + 2 * h * 8 * d + 64 * d * h
    assert m.layers[0].attention.proj_params > plain  # q/k/v read [embedding, feature] = 2h


def test_infer_dtypes() -> None:
    assert infer_dtypes({"torch_dtype": "bfloat16"})["weights"] == "bf16"
    assert infer_dtypes({"quantization_config": {"quant_method": "fp8"}})["experts"] == "fp8"
    assert infer_dtypes({"quantization_config": {"quant_method": "mxfp4"}})["weights"] == "bf16"


def test_missing_key_is_named() -> None:
    cfg = load("Llama-3.1-8B")
    del cfg["hidden_size"]
    with pytest.raises(ValueError, match="hidden_size"):
        model_from_hf_config(cfg)
