"""Build a :class:`~spectune.core.model.Model` from a Hugging Face ``config.json`` dict.

Families: Llama / Mistral / Qwen2 / Qwen3 (dense, GQA), Mixtral, Qwen2-MoE / Qwen3-MoE,
DeepSeek-V2 / V3 / R1 / Kimi-K2 / GLM-4.x-MoE (MLA or GQA + MoE with shared experts and
leading dense layers), DeepSeek-V3.2 (MLA + sparse-attention indexer), DeepSeek-V4
(per-layer compressed attention), gpt-oss (alternating sliding / full attention, MXFP4
experts), Llama-4 (interleaved MoE with a shared expert, chunked attention), hybrid
``layer_types`` models (Qwen3-Next / Qwen3.5: gated-DeltaNet linear attention), EAGLE-1 and
EAGLE-3 heads (``LlamaForCausalLMEagle3``), Gemma-3 / Gemma-4 (sliding and global layers with
their own KV heads and head size, Gemma-4's experts beside a dense MLP: :mod:`spectune.documents.hf_gemma`);
quantization from ``quantization_config`` and
``hf_quant_config.json``. Cost-changing fields that are not modelled are refused.
Pure: takes dicts, returns specs; raises ``ValueError`` with the offending key. Every field
is read through :mod:`spectune.documents.config_fields`, which checks its type (a list of names, text,
a mapping, true/false, whole numbers) and says what it expected. Every shape (layers,
heads, widths, experts, vocabulary) must be a whole number within the bounds of
:mod:`spectune.base.limits`: a zero head count or 10^8 layers is refused here, not met later as
a division by zero or a minutes-long evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import spectune.documents.hf_gemma as hf_gemma
from spectune.base.limits import (
    MAX_CONTEXT,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_VOCAB,
)
from spectune.core.model import Attention, DenseFFN, LayerGroup, Model, MoE
from spectune.documents.config_fields import count as _count
from spectune.documents.config_fields import flag, mapping, names, text, wholes, wrong
from spectune.documents.inputs import short

DTYPE_KEYS = ("weights", "experts", "kv_cache", "lm_head", "activations")
#: NVIDIA ModelOpt's quantization file, read beside a checkpoint's config.json.
HF_QUANT_CONFIG = "hf_quant_config.json"


#: ``quantization_config.quant_method`` values spectune prices (transformers / vLLM names);
#: AWQ / GPTQ 4-bit is the ``int4`` dtype (:data:`spectune.core.hardware.DTYPE_BYTES`).
_QUANT_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "nvfp4", "modelopt_fp4", "modelopt", "awq",
                  "gptq", "awq_marlin", "gptq_marlin", "compressed-tensors")


def _bits_dtype(bits: int, kind: str, key: str) -> str:
    if bits == 4 and kind in ("int", ""):
        return "int4"
    if bits == 8:
        return "fp8" if kind == "float" else "int8"
    raise ValueError(f"{key}: {bits}-bit {kind or 'int'} weights are not modelled "
                     "(spectune prices 4-bit int, 8-bit int/float, fp8, mxfp4, nvfp4)")


def _modelopt_dtype(algo: str, key: str) -> str:
    a = algo.upper()
    if a.startswith("FP8"):
        return "fp8"
    if a == "NVFP4" or a.startswith("NVFP4"):
        return "nvfp4"
    if "W4A16" in a or "INT4" in a:
        return "int4"
    if "W8A8" in a or "INT8" in a:
        return "int8"
    raise ValueError(f"{key}: quant_algo {short(algo)} is not modelled (FP8, NVFP4, W4A16_AWQ, W8A8)")


def _kv_scheme_bits(q: Mapping[str, Any], qk: str) -> tuple[int, str]:
    """(bits, type) of ``quantization_config.kv_cache_scheme``; (16, "") when absent."""
    kvs = mapping(q, "kv_cache_scheme", where=qk)
    if not kvs:
        return 16, ""
    where = qk + "kv_cache_scheme."
    return _count(kvs, "num_bits", hi=64, default=16, where=where), text(kvs, "type", where=where)


def infer_dtypes(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Storage formats a release ships in, read from ``quantization_config`` (the forms of
    transformers / vLLM: fp8, mxfp4, nvfp4 / modelopt, AWQ and GPTQ int4, compressed-tensors
    int4/int8/fp8), NVIDIA ModelOpt's ``hf_quant_config.json`` (``quantization.quant_algo``,
    ``kv_cache_quant_algo``; passed in as ``cfg["hf_quant_config"]``) and ``torch_dtype``.
    A method spectune does not price is refused (ValueError naming the field)."""
    torch_dtype = text(cfg, "torch_dtype") or text(cfg, "dtype") or "bfloat16"
    base = "fp16" if torch_dtype == "float16" else "bf16"
    weights = experts = kv = base
    q = mapping(cfg, "quantization_config")
    qk = "config.json quantization_config."
    method = text(q, "quant_method", where=qk).lower()
    if method and method not in _QUANT_METHODS:
        raise ValueError(f"quantization_config.quant_method {short(method)} is not modelled; "
                         f"known: {', '.join(_QUANT_METHODS)} (or set the model's dtypes)")
    if method in ("fp8", "fbgemm_fp8") or q.get("fmt") == "e4m3":
        weights = experts = "fp8"
    elif method == "mxfp4":
        experts = "mxfp4"  # gpt-oss: attention, router, embeddings and head stay bf16
    elif method in ("nvfp4", "modelopt_fp4"):
        weights = experts = "nvfp4"
    elif method == "modelopt":
        weights = experts = _modelopt_dtype(text(q, "quant_algo", where=qk),
                                            "quantization_config.quant_algo")
        # vLLM's ModelOpt config: config.json's flat form states kv_cache_scheme {float, 8 bits}
        if (text(q, "kv_cache_quant_algo", where=qk).upper() == "FP8"
                or _kv_scheme_bits(q, qk) == (8, "float")):
            kv = "fp8"
    elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits = _count(q, "bits", "w_bit", hi=64, default=4, where=qk)
        weights = experts = _bits_dtype(bits, "int", "quantization_config.bits")
    elif method == "compressed-tensors":
        groups = mapping(q, "config_groups", where=qk)
        first = next((g for g in groups.values() if isinstance(g, Mapping)), {})
        gk = qk + "config_groups.*."
        w = mapping(first, "weights", where=gk)
        weights = experts = _bits_dtype(_count(w, "num_bits", hi=64, default=8, where=gk + "weights."),
                                        text(w, "type", where=gk + "weights.") or "int",
                                        "quantization_config.config_groups.*.weights")
        if _kv_scheme_bits(q, qk)[0] == 8:
            kv = "fp8"
    hq = cfg.get("hf_quant_config") or {}  # hf_quant_config.json, read beside config.json
    if not isinstance(hq, Mapping):
        raise wrong(HF_QUANT_CONFIG, "a JSON object", hq)
    mk = f"{HF_QUANT_CONFIG} quantization."
    mo = mapping(hq, "quantization", where=f"{HF_QUANT_CONFIG} ")
    if text(mo, "quant_algo", where=mk):
        weights = experts = _modelopt_dtype(text(mo, "quant_algo", where=mk), mk + "quant_algo")
    if text(mo, "kv_cache_quant_algo", where=mk).upper() == "FP8":
        kv = "fp8"
    if text(cfg, "expert_dtype").lower() in ("fp4", "mxfp4"):
        experts = "mxfp4"  # DeepSeek-V4: experts natively MXFP4 (seed 000)
    return {"weights": weights, "experts": experts, "kv_cache": kv, "lm_head": base,
            "activations": "bf16"}


def _gqa_proj(h: int, n_h: int, n_kv: int, d: int, q_in: int | None = None) -> int:
    q_in = q_in or h
    return q_in * n_h * d + 2 * q_in * n_kv * d + n_h * d * h


def _mla(cfg: Mapping[str, Any], h: int, n_h: int) -> Attention:
    q_lora = _count(cfg, "q_lora_rank", hi=MAX_HIDDEN, default=0)
    nope = _count(cfg, "qk_nope_head_dim", hi=MAX_HEAD_DIM)
    rope = _count(cfg, "qk_rope_head_dim", hi=MAX_HEAD_DIM)
    v = _count(cfg, "v_head_dim", hi=MAX_HEAD_DIM, default=nope) or nope
    d_c = _count(cfg, "kv_lora_rank", hi=MAX_HIDDEN)
    q = h * q_lora + q_lora * n_h * (nope + rope) if q_lora else h * n_h * (nope + rope)
    proj = q + h * (d_c + rope) + d_c * n_h * (nope + v) + n_h * v * h
    return Attention("mla", n_h, 1, nope + rope, proj, kv_lora_rank=d_c, rope_dim=rope, v_head_dim=v)


def _dsa(cfg: Mapping[str, Any], h: int, mla: Attention) -> Attention:
    """DeepSeek-V3.2 sparse attention: MLA plus a lightning indexer of ``index_n_heads`` x
    ``index_head_dim`` (wq_b q_lora -> heads*dim, wk h -> dim, weights_proj h -> heads) that
    picks ``index_topk`` positions per query (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py)."""
    heads = _count(cfg, "index_n_heads", hi=MAX_HEADS)
    dim = _count(cfg, "index_head_dim", hi=MAX_HEAD_DIM)
    q_lora = _count(cfg, "q_lora_rank", hi=MAX_HIDDEN, lo=0, default=0) or h
    idx_proj = q_lora * heads * dim + h * dim + h * heads
    return replace(mla, kind="dsa", proj_params=mla.proj_params + idx_proj,
                   index_topk=_count(cfg, "index_topk", hi=MAX_CONTEXT), index_n_heads=heads,
                   index_head_dim=dim)


def _moe(cfg: Mapping[str, Any]) -> MoE:
    n_exp = _count(cfg, "n_routed_experts", "num_experts", "num_local_experts", hi=MAX_EXPERTS)
    top_k = _count(cfg, "num_experts_per_tok", "experts_per_token", "top_k_experts", hi=n_exp)
    inter = _count(cfg, "moe_intermediate_size", "intermediate_size", hi=MAX_INTERMEDIATE)
    n_shared = _count(cfg, "n_shared_experts", hi=MAX_EXPERTS, lo=0, default=0)
    shared_inter = _count(cfg, "shared_expert_intermediate_size", hi=MAX_INTERMEDIATE, lo=0, default=0)
    if shared_inter and not n_shared:
        n_shared = 1  # Qwen2-MoE: one shared expert of its own width
    if text(cfg, "model_type").startswith("llama4") and not n_shared:
        n_shared = 1  # Llama-4: one always-on shared expert as wide as a routed one
    beside = hf_gemma.beside_experts(cfg)
    if beside:
        n_shared, shared_inter = 1, beside  # Gemma-4: the dense MLP runs beside the experts
    return MoE(n_exp, top_k, inter, n_shared, shared_inter or inter)


def _is_moe(cfg: Mapping[str, Any]) -> bool:
    stated = hf_gemma.moe_block(cfg)  # Gemma-4 says it: experts only with enable_moe_block
    if stated is not None:
        return stated
    return any(cfg.get(k) for k in ("n_routed_experts", "num_experts", "num_local_experts"))


def _v4_layers(cfg: Mapping[str, Any], h: int, n_h: int, ffn: MoE) -> tuple[LayerGroup, ...]:
    """DeepSeek-V4: ``compress_ratios`` per layer (0 sliding window only, 4 CSA, 128 HCA),
    each with a ``sliding_window`` of uncompressed recent tokens; MLA latent ``head_dim``
    with a ``qk_rope_head_dim`` rope key (seed 000: d_c = 512, d_r = 64)."""
    d_c = _count(cfg, "head_dim", hi=MAX_HEAD_DIM)
    rope = _count(cfg, "qk_rope_head_dim", hi=MAX_HEAD_DIM)
    q_lora = _count(cfg, "q_lora_rank", hi=MAX_HIDDEN)
    o_lora = _count(cfg, "o_lora_rank", hi=MAX_HIDDEN, lo=0, default=0)
    o_groups = _count(cfg, "o_groups", hi=MAX_HEADS, default=1) or 1
    window = _count(cfg, "sliding_window", hi=2**31, lo=0, default=0)
    q = h * q_lora + q_lora * n_h * (d_c + rope)
    kv = h * (d_c + rope)
    # Grouped low-rank output: each of o_groups maps its heads' values to o_lora, then to h.
    o = (n_h * d_c * o_lora + o_groups * o_lora * h) if o_lora else n_h * d_c * h
    base = q + kv + o
    idx_heads = _count(cfg, "index_n_heads", hi=MAX_HEADS, lo=0, default=0)
    idx_dim = _count(cfg, "index_head_dim", hi=MAX_HEAD_DIM, lo=0, default=0)
    idx_proj = q_lora * idx_heads * idx_dim + h * idx_dim + h * idx_heads
    ratios = wholes(cfg, "compress_ratios", hi=1 << 20) or []
    n_layers = _count(cfg, "num_hidden_layers", hi=MAX_LAYERS)
    ratios = (ratios + [0] * n_layers)[:n_layers]
    groups: list[LayerGroup] = []
    for r in ratios:
        if r == 0:
            att = Attention("swa", n_h, 1, d_c + rope, base, kv_lora_rank=d_c, rope_dim=rope,
                            window=window)
        elif r <= 8:
            att = Attention("csa", n_h, 1, d_c + rope, base + idx_proj, kv_lora_rank=d_c,
                            rope_dim=rope, window=window, compress_ratio=int(r),
                            index_topk=_count(cfg, "index_topk", hi=MAX_CONTEXT, default=512),
                            index_n_heads=idx_heads, index_head_dim=idx_dim)
        else:
            att = Attention("hca", n_h, 1, d_c + rope, base, kv_lora_rank=d_c, rope_dim=rope,
                            window=window, compress_ratio=int(r))
        if groups and groups[-1].attention == att:
            groups[-1] = LayerGroup(groups[-1].count + 1, att, ffn)
        else:
            groups.append(LayerGroup(1, att, ffn))
    return tuple(groups)


#: config.json fields that change the cost of a step and that spectune does not model:
#: refused (ValueError naming the field), never silently ignored.
UNMODELLED = {
    "hybrid_override_pattern": "Nemotron-H's Mamba/attention/MLP layer pattern",
    "attn_layer_period": "Jamba's Mamba/attention interleave",
    "layers_block_type": "a hybrid Mamba/attention stack",
    "cross_attention_layers": "cross-attention layers (Mllama)",
    "ssm_state_size": "Mamba state-space layers",
}
#: Families whose config.json fields spectune reads; another ``model_type`` is priced from
#: its sizes with a warning naming it (fields of its own that change the cost are unknown).
KNOWN_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                     "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_text",
                     "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "kimi_k2",
                     "glm4_moe", "glm4_moe_lite", "gpt_oss", "llama4", "llama4_text",
                     *hf_gemma.GEMMA3_TYPES, *hf_gemma.GEMMA4_TYPES)
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


def _state_dtype(cfg: Mapping[str, Any]) -> str:
    raw = text(cfg, "mamba_ssm_dtype") or "float32"
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(raw, "fp32")


def _linear_attention(cfg: Mapping[str, Any], h: int) -> Attention:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5): projections in_proj_qkvz h -> 2*n_k*d_k +
    2*n_v*d_v, in_proj_ba h -> 2*n_v, a depthwise conv over q/k/v of ``linear_conv_kernel_dim``
    taps and out_proj n_v*d_v -> h (transformers ``Qwen3NextGatedDeltaNet``)."""
    n_k = _count(cfg, "linear_num_key_heads", hi=MAX_HEADS)
    n_v = _count(cfg, "linear_num_value_heads", hi=MAX_HEADS)
    d_k = _count(cfg, "linear_key_head_dim", hi=MAX_HEAD_DIM)
    d_v = _count(cfg, "linear_value_head_dim", hi=MAX_HEAD_DIM)
    kernel = _count(cfg, "linear_conv_kernel_dim", hi=MAX_HEAD_DIM, default=4)
    conv_dim = 2 * n_k * d_k + n_v * d_v
    proj = h * (2 * n_k * d_k + 2 * n_v * d_v) + h * 2 * n_v + conv_dim * kernel + n_v * d_v * h
    return Attention("linear", n_v, n_k, d_v, proj, key_dim=d_k, conv_kernel=kernel,
                     state_dtype=_state_dtype(cfg))


def _layer_types(cfg: Mapping[str, Any], mtype: str, n_layers: int) -> list[str]:
    """The attention kind of every layer, from ``layer_types`` or the fields that imply it
    (Qwen3-Next ``full_attention_interval``; Llama-4 ``no_rope_layers`` / chunked attention
    on 3 of every 4 layers; Mistral / Mixtral sliding window)."""
    types = names(cfg, "layer_types")
    if types:
        if len(types) < n_layers:
            raise ValueError(f"layer_types has {len(types)} entries for {n_layers} layers")
        for i, t in enumerate(types[:n_layers]):
            if t not in LAYER_TYPES:
                raise ValueError(f"layer_types[{i}] = {short(t)} is not modelled "
                                 f"(known: {', '.join(LAYER_TYPES)})")
        return types[:n_layers]
    if cfg.get("full_attention_interval"):
        k = _count(cfg, "full_attention_interval", hi=MAX_LAYERS)
        return ["full_attention" if (i + 1) % k == 0 else "linear_attention"
                for i in range(n_layers)]
    if cfg.get("attention_chunk_size"):
        # transformers Llama4TextConfig: no_rope_layers[i] = 1 (RoPE, chunked local
        # attention) unless (i + 1) % 4 == 0 (NoPE, global attention).
        rope = wholes(cfg, "no_rope_layers", hi=1) or [int((i + 1) % 4 != 0) for i in range(n_layers)]
        if len(rope) < n_layers:
            raise ValueError(f"config.json no_rope_layers has {len(rope)} entries for {n_layers} layers")
        return ["chunked_attention" if rope[i] else "full_attention" for i in range(n_layers)]
    gemma = hf_gemma.default_layer_types(cfg, mtype, n_layers)
    if gemma is not None:
        return gemma
    use_window = flag(cfg, "use_sliding_window", True) and cfg.get("sliding_window")
    if use_window and mtype in ("mistral", "mixtral"):
        return ["sliding_attention"] * n_layers
    return ["full_attention"] * n_layers


def _moe_layers(cfg: Mapping[str, Any], n_layers: int) -> set[int]:
    """Indices of the layers whose FFN is a mixture of experts."""
    explicit = wholes(cfg, "moe_layers", hi=MAX_LAYERS)  # Llama-4's explicit list
    if explicit is not None:
        return set(explicit)
    first_dense = _count(cfg, "first_k_dense_replace", hi=MAX_LAYERS, lo=0, default=0)
    dense = set(range(min(first_dense, n_layers)))
    dense |= set(wholes(cfg, "mlp_only_layers", hi=MAX_LAYERS) or [])
    steps = [_count(cfg, k, hi=MAX_LAYERS, lo=0, default=0)
             for k in ("interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq")]
    step = next((s for s in steps if s), 1)
    if step > 1:
        # Llama-4 / Qwen2-MoE: every step-th layer, counting from 1, is MoE.
        dense |= {i for i in range(n_layers) if (i + 1) % step != 0}
    return set(range(n_layers)) - dense


def model_from_hf_config(cfg: Mapping[str, Any], name: str = "",
                         dtypes: Mapping[str, str] | None = None, source: str = "") -> Model:
    """A :class:`Model` from a ``config.json`` mapping; ``dtypes`` overrides the inferred
    storage formats (keys ``weights``, ``experts``, ``kv_cache``, ``lm_head``, ``activations``).

    Fields that change the cost and are not modelled are refused (:data:`UNMODELLED`,
    unknown ``layer_types``, unknown quantization methods) with a ValueError naming them."""
    if "text_config" in cfg and "hidden_size" not in cfg:
        inner = mapping(cfg, "text_config")
        cfg = {**inner, "quantization_config": cfg.get("quantization_config"),
               "hf_quant_config": cfg.get("hf_quant_config"),
               "tie_word_embeddings": inner.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))}
    for key, what in UNMODELLED.items():
        if cfg.get(key) is not None:
            raise ValueError(f"{key}: {what} is not modelled by spectune's cost model")
    arch = " ".join(names(cfg, "architectures"))
    mtype = text(cfg, "model_type")
    hf_gemma.refuse_unmodelled(cfg, mtype)
    h = _count(cfg, "hidden_size", hi=MAX_HIDDEN)
    n_h = _count(cfg, "num_attention_heads", hi=MAX_HEADS)
    n_kv = _count(cfg, "num_key_value_heads", hi=n_h, default=n_h) or n_h
    d = _count(cfg, "head_dim", hi=MAX_HEAD_DIM, default=0) or max(h // n_h, 1)
    n_layers = _count(cfg, "num_hidden_layers", hi=MAX_LAYERS)
    vocab = _count(cfg, "vocab_size", hi=MAX_VOCAB)
    dt = {**infer_dtypes(cfg), **(dtypes or {})}
    eagle3 = "Eagle3" in arch

    groups: tuple[LayerGroup, ...]
    if mtype == "deepseek_v4" or cfg.get("compress_ratios") is not None:
        groups = _v4_layers(cfg, h, n_h, _moe(cfg))
    else:
        if cfg.get("kv_lora_rank"):
            att = _mla(cfg, h, n_h)
            if cfg.get("index_topk"):
                att = _dsa(cfg, h, att)
        else:
            proj = _gqa_proj(h, n_h, n_kv, d, q_in=2 * h if eagle3 else None)
            if flag(cfg, "attn_output_gate"):
                proj += h * n_h * d  # Qwen3.5 / Qwen3-Next: q_proj also makes a sigmoid gate
            if eagle3:
                proj += 3 * h * h  # EAGLE-3 fuses low/mid/high target features: fc 3h -> h
            att = Attention("gqa", n_h, n_kv, d, proj)
        if _is_moe(cfg):
            moe = _moe(cfg)
            moe_at = _moe_layers(cfg, n_layers)
            # Llama-4's dense layers are wider than its experts: intermediate_size_mlp.
            dense_inter = _count(cfg, "intermediate_size_mlp", "intermediate_size", hi=MAX_INTERMEDIATE,
                                 lo=0, default=0)
            ffns = [moe if i in moe_at else DenseFFN(dense_inter) for i in range(n_layers)]
        else:
            ffns = [DenseFFN(_count(cfg, "intermediate_size", hi=MAX_INTERMEDIATE))] * n_layers
        types = hf_gemma.force_last_full(_layer_types(cfg, mtype, n_layers), mtype)
        window = _count(cfg, "sliding_window", hi=2**31, lo=0, default=0)
        chunk = _count(cfg, "attention_chunk_size", hi=2**31, lo=0, default=0)
        linear = _linear_attention(cfg, h) if "linear_attention" in types else None
        # Full-attention layers may differ in KV heads and head size (Gemma-4: hf_gemma).
        full = hf_gemma.global_attention(cfg, mtype, att, h, _gqa_proj) if "full_attention" in types else att
        atts = []
        for kind in types:
            if kind == "linear_attention" and linear is not None:
                atts.append(linear)
            elif kind in ("sliding_attention", "chunked_attention"):
                # Chunked local attention (Llama-4) sees at most one chunk of keys: priced
                # as a window of the chunk size (an upper bound; on average half a chunk).
                w = chunk if kind == "chunked_attention" else window
                atts.append(replace(att, kind="swa", window=w))
            else:
                atts.append(full)
        built: list[LayerGroup] = []
        for a, f in zip(atts, ffns, strict=False):
            if built and built[-1].attention == a and built[-1].ffn == f:
                built[-1] = LayerGroup(built[-1].count + 1, a, f)
            else:
                built.append(LayerGroup(1, a, f))
        groups = tuple(built)

    head_vocab = _count(cfg, "draft_vocab_size", hi=MAX_VOCAB, lo=0, default=0) if eagle3 else 0
    notes = []
    if mtype and mtype not in KNOWN_MODEL_TYPES:
        notes.append(f"model_type {short(mtype)} is not a family spectune knows: priced as a plain "
                     "transformer from its sizes; a field of its own that changes the cost is "
                     "not modelled")
    return Model(
        name=name or text(cfg, "_name_or_path") or mtype or "model",
        hidden_size=h,
        vocab_size=vocab,
        layers=groups,
        weight_dtype=dt["weights"],
        expert_dtype=dt["experts"],
        kv_dtype=dt["kv_cache"],
        act_dtype=dt.get("activations", "bf16"),
        lm_head_dtype=dt["lm_head"],
        lm_head_vocab=head_vocab,
        tied_embeddings=flag(cfg, "tie_word_embeddings"),
        source=source,
        notes=tuple(notes),
    )


def eagle_head(model: Model) -> Model:
    """An EAGLE-1 / EAGLE-2 head: its decoder layer(s) plus the input map ``fc`` that fuses
    the token embedding with the target's feature, 2*hidden -> hidden (SafeAILab/EAGLE
    ``eagle/model/cnets.py``; vLLM ``model_executor/models/llama_eagle.py``: ReplicatedLinear
    of input_size hidden_size * 2). The config.json of such a head is a plain
    ``LlamaForCausalLM`` one, so the drafter kind says what it is. Priced with the first
    layer's projections (a weight GEMM read once per pass)."""
    h = model.hidden_size
    first = model.layers[0]
    att = replace(first.attention, proj_params=first.attention.proj_params + 2 * h * h)
    groups = [LayerGroup(1, att, first.ffn)]
    if first.count > 1:
        groups.append(LayerGroup(first.count - 1, first.attention, first.ffn))
    return replace(model, layers=(*groups, *model.layers[1:]))
