"""Build a :class:`~spectune.model.Model` from a Hugging Face ``config.json`` dict.

Families: Llama / Mistral / Qwen2 / Qwen3 (dense, GQA), Mixtral, Qwen2-MoE / Qwen3-MoE,
DeepSeek-V2 / V3 / R1 / Kimi-K2 / GLM-4.x-MoE (MLA or GQA + MoE with shared experts and
leading dense layers), DeepSeek-V4 (per-layer compressed attention), gpt-oss (alternating
sliding / full attention, MXFP4 experts), and EAGLE-3 heads (``LlamaForCausalLMEagle3``).
Pure: takes dicts, returns specs; raises ``ValueError`` with the offending key. Every
shape (layers, heads, widths, experts, vocabulary) must be a whole number within the
bounds of :mod:`spectune.limits`: a zero head count or 10^8 layers is refused here, not
met later as a division by zero or a minutes-long evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spectune.inputs import number_problem
from spectune.limits import (
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_VOCAB,
)
from spectune.model import Attention, DenseFFN, LayerGroup, Model, MoE

DTYPE_KEYS = ("weights", "experts", "kv_cache", "lm_head", "activations")


def _req(cfg: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    raise ValueError(f"config.json has no {' / '.join(keys)}")


def _whole(key: str, value: Any, hi: int, lo: int = 1) -> int:
    problem = number_problem(value, integer=True, lo=lo, hi=hi)
    if problem:
        raise ValueError(f"config.json {key}: {problem}")
    return int(value)


def _count(cfg: Mapping[str, Any], *keys: str, hi: int, lo: int = 1, default: int | None = None) -> int:
    """The first of ``keys`` present, as a whole number in [lo, hi]; ``default`` when none is
    (ValueError naming the keys when there is no default)."""
    for k in keys:
        if cfg.get(k) is not None:
            return _whole(k, cfg[k], hi, lo)
    if default is not None:
        return default
    raise ValueError(f"config.json has no {' / '.join(keys)}")


def infer_dtypes(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Storage formats a release ships in, read from ``quantization_config`` / ``torch_dtype``."""
    torch_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    base = "fp16" if torch_dtype == "float16" else "bf16"
    weights = experts = base
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, Mapping):
        q = {}
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8" or q.get("fmt") == "e4m3":
        weights = experts = "fp8"
    elif method == "mxfp4":
        experts = "mxfp4"  # gpt-oss: attention, router, embeddings and head stay bf16
    elif method in ("nvfp4", "modelopt_fp4"):
        weights = experts = "nvfp4"
    if str(cfg.get("expert_dtype", "")).lower() in ("fp4", "mxfp4"):
        experts = "mxfp4"  # DeepSeek-V4: experts natively MXFP4 (seed 000)
    return {"weights": weights, "experts": experts, "kv_cache": base, "lm_head": base,
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
    return Attention("mla", n_h, 1, nope + rope, proj, kv_lora_rank=d_c, rope_dim=rope)


def _moe(cfg: Mapping[str, Any]) -> MoE:
    n_exp = _count(cfg, "n_routed_experts", "num_experts", "num_local_experts", hi=MAX_EXPERTS)
    top_k = _count(cfg, "num_experts_per_tok", "experts_per_token", hi=n_exp)
    inter = _count(cfg, "moe_intermediate_size", "intermediate_size", hi=MAX_INTERMEDIATE)
    n_shared = _count(cfg, "n_shared_experts", hi=MAX_EXPERTS, lo=0, default=0)
    shared_inter = _count(cfg, "shared_expert_intermediate_size", hi=MAX_INTERMEDIATE, lo=0, default=0)
    if shared_inter and not n_shared:
        n_shared = 1  # Qwen2-MoE: one shared expert of its own width
    return MoE(n_exp, top_k, inter, n_shared, shared_inter or inter)


def _is_moe(cfg: Mapping[str, Any]) -> bool:
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
    ratios = [_whole(f"compress_ratios[{i}]", r, 1 << 20, lo=0)
              for i, r in enumerate(cfg.get("compress_ratios") or [])]
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
                            index_topk=int(cfg.get("index_topk") or 512),
                            index_n_heads=idx_heads, index_head_dim=idx_dim)
        else:
            att = Attention("hca", n_h, 1, d_c + rope, base, kv_lora_rank=d_c, rope_dim=rope,
                            window=window, compress_ratio=int(r))
        if groups and groups[-1].attention == att:
            groups[-1] = LayerGroup(groups[-1].count + 1, att, ffn)
        else:
            groups.append(LayerGroup(1, att, ffn))
    return tuple(groups)


def model_from_hf_config(cfg: Mapping[str, Any], name: str = "",
                         dtypes: Mapping[str, str] | None = None, source: str = "") -> Model:
    """A :class:`Model` from a ``config.json`` mapping; ``dtypes`` overrides the inferred
    storage formats (keys ``weights``, ``experts``, ``kv_cache``, ``lm_head``, ``activations``)."""
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = {**cfg["text_config"], "quantization_config": cfg.get("quantization_config")}
    arch = " ".join(cfg.get("architectures") or [])
    mtype = str(cfg.get("model_type", ""))
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
        else:
            proj = _gqa_proj(h, n_h, n_kv, d, q_in=2 * h if eagle3 else None)
            if eagle3:
                proj += 3 * h * h  # EAGLE-3 fuses low/mid/high target features: fc 3h -> h
            att = Attention("gqa", n_h, n_kv, d, proj)
        if _is_moe(cfg):
            moe = _moe(cfg)
            first_dense = _count(cfg, "first_k_dense_replace", hi=MAX_LAYERS, lo=0, default=0)
            dense_inter = _count(cfg, "intermediate_size", hi=MAX_INTERMEDIATE, lo=0, default=0)
            dense_layers = set(range(min(first_dense, n_layers)))
            dense_layers |= {_whole(f"mlp_only_layers[{j}]", i, MAX_LAYERS, lo=0)
                             for j, i in enumerate(cfg.get("mlp_only_layers") or [])}
            step = _count(cfg, "decoder_sparse_step", "moe_layer_freq", hi=MAX_LAYERS, lo=0, default=1) or 1
            if step > 1:
                dense_layers |= {i for i in range(n_layers) if (i + 1) % step != 0}
            ffns = [DenseFFN(dense_inter) if i in dense_layers else moe for i in range(n_layers)]
        else:
            ffns = [DenseFFN(_count(cfg, "intermediate_size", hi=MAX_INTERMEDIATE))] * n_layers
        layer_types = list(cfg.get("layer_types") or [])
        window = _count(cfg, "sliding_window", hi=2**31, lo=0, default=0)
        use_window = cfg.get("use_sliding_window", True) is not False and window > 0
        atts = []
        for i in range(n_layers):
            kind = layer_types[i] if i < len(layer_types) else ""
            sliding = "sliding" in kind or (not layer_types and use_window and mtype in
                                            ("mistral", "mixtral"))
            atts.append(Attention("swa", att.n_heads, att.n_kv_heads, att.head_dim,
                                  att.proj_params, att.kv_lora_rank, att.rope_dim, window)
                        if sliding else att)
        built: list[LayerGroup] = []
        for a, f in zip(atts, ffns, strict=False):
            if built and built[-1].attention == a and built[-1].ffn == f:
                built[-1] = LayerGroup(built[-1].count + 1, a, f)
            else:
                built.append(LayerGroup(1, a, f))
        groups = tuple(built)

    head_vocab = _count(cfg, "draft_vocab_size", hi=MAX_VOCAB, lo=0, default=0) if eagle3 else 0
    return Model(
        name=name or str(cfg.get("_name_or_path") or mtype or "model"),
        hidden_size=h,
        vocab_size=vocab,
        layers=groups,
        weight_dtype=dt["weights"],
        expert_dtype=dt["experts"],
        kv_dtype=dt["kv_cache"],
        act_dtype=dt.get("activations", "bf16"),
        lm_head_dtype=dt["lm_head"],
        lm_head_vocab=head_vocab,
        source=source,
    )
