"""Gemma-3 / Gemma-4 fields of a Hugging Face ``config.json``, read exactly per layer group.

Gemma-4 interleaves sliding-window and full ("global") attention layers that differ in KV
heads and head size: Gemma-4-31B has sliding layers of 16 KV heads x 256 and global layers
of 4 KV heads x 512 (``num_key_value_heads`` / ``head_dim`` vs ``num_global_key_value_heads``
/ ``global_head_dim``). The rules are transformers' ``Gemma4TextConfig.__post_init__``
(transformers 5.24.0, ``models/gemma4/configuration_gemma4.py``) and vLLM's
``Gemma4DecoderLayer`` (vllm-project/vllm ``vllm/model_executor/models/gemma4.py``):

* a full-attention layer has ``global_head_dim`` (transformers' default 512);
* its KV heads are ``num_global_key_value_heads`` only when ``attention_k_eq_v`` is true
  (keys double as values), else ``num_key_value_heads`` as the sliding layers;
* with ``attention_k_eq_v`` vLLM still runs one fused QKV projection, loading the K weights
  into the V slot too, and caches K and V as usual: so projections and KV cache are priced
  as plain GQA of the layer's own heads and size (no discount for the shared K/V weights);
* ``layer_types`` absent: 5 sliding to 1 full (pattern 6); Gemma-3 reads the legacy
  ``sliding_window_pattern``; Gemma-4 forces its last layer to full attention;
* ``enable_moe_block`` (Gemma-4-26B-A4B): a dense MLP of ``intermediate_size`` runs beside
  ``top_k_experts`` of ``num_experts`` routed experts on every token -- priced as one
  always-on shared expert of that width.

Not modelled, refused naming the field: cross-layer KV sharing (``num_kv_shared_layers`` >
0), per-layer embeddings (``hidden_size_per_layer_input`` > 0; both Gemma-4 E2B / E4B) and
bidirectional attention over all tokens (``use_bidirectional_attention: all``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spectune.base.limits import MAX_HEAD_DIM, MAX_INTERMEDIATE, MAX_LAYERS
from spectune.core.model import Attention
from spectune.documents.config_fields import count, flag

GEMMA4_TYPES = ("gemma4", "gemma4_text")
GEMMA3_TYPES = ("gemma3", "gemma3_text")
#: transformers: ``sliding_window_pattern = 6  # by default 5:1`` (Gemma-3 and Gemma-4).
DEFAULT_PATTERN = 6
#: transformers Gemma4TextConfig: ``kwargs.pop("global_head_dim", 512)``.
DEFAULT_GLOBAL_HEAD_DIM = 512


def is_gemma4(mtype: str) -> bool:
    return mtype in GEMMA4_TYPES


def refuse_unmodelled(cfg: Mapping[str, Any], mtype: str) -> None:
    """ValueError naming the field when a Gemma config uses a feature spectune does not price."""
    if mtype not in GEMMA4_TYPES + GEMMA3_TYPES:
        return
    if count(cfg, "num_kv_shared_layers", hi=MAX_LAYERS, lo=0, default=0):
        raise ValueError("config.json num_kv_shared_layers: layers that reuse an earlier layer's "
                         "KV cache (Gemma-4 E2B / E4B) are not modelled by spectune's cost model")
    if count(cfg, "hidden_size_per_layer_input", hi=MAX_INTERMEDIATE, lo=0, default=0):
        raise ValueError("config.json hidden_size_per_layer_input: per-layer embeddings (Gemma-4 "
                         "E2B / E4B) are not modelled by spectune's cost model")
    bidi = cfg.get("use_bidirectional_attention")
    if bidi is True or bidi == "all":
        raise ValueError("config.json use_bidirectional_attention: attention over all tokens "
                         "both ways is not modelled (spectune prices causal decoding)")


def default_layer_types(cfg: Mapping[str, Any], mtype: str, n_layers: int) -> list[str] | None:
    """Gemma's interleave when ``layer_types`` is absent: every ``sliding_window_pattern``-th
    layer full attention, the rest sliding; None for other families."""
    if mtype not in GEMMA4_TYPES + GEMMA3_TYPES and cfg.get("sliding_window_pattern") is None:
        return None
    # Gemma-4 ignores the legacy key (transformers hard-codes 6); Gemma-3 reads it.
    k = DEFAULT_PATTERN if is_gemma4(mtype) else count(cfg, "sliding_window_pattern", hi=MAX_LAYERS,
                                                       default=DEFAULT_PATTERN)
    return ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(n_layers)]


def force_last_full(types: list[str], mtype: str) -> list[str]:
    """Gemma-4: the last layer is full attention whatever ``layer_types`` says (transformers
    forces it, with a warning)."""
    if is_gemma4(mtype) and types and types[-1] != "full_attention":
        return [*types[:-1], "full_attention"]
    return types


def global_attention(cfg: Mapping[str, Any], mtype: str, att: Attention, h: int,
                     gqa_proj: Any) -> Attention:
    """The attention of a full-attention layer: ``att`` with Gemma-4's global head size and
    KV heads where the config gives them (module docstring); ``att`` itself otherwise.
    ``gqa_proj(h, n_heads, n_kv, head_dim)`` counts q/k/v/o projection weights."""
    if att.kind != "gqa":
        return att
    has_keys = cfg.get("global_head_dim") is not None or cfg.get("num_global_key_value_heads") is not None
    if not (has_keys or is_gemma4(mtype)):
        return att
    d = count(cfg, "global_head_dim", hi=MAX_HEAD_DIM,
              default=DEFAULT_GLOBAL_HEAD_DIM if is_gemma4(mtype) else att.head_dim)
    n_kv = att.n_kv_heads
    if flag(cfg, "attention_k_eq_v"):
        n_kv = count(cfg, "num_global_key_value_heads", hi=att.n_heads, default=n_kv)
    if (d, n_kv) == (att.head_dim, att.n_kv_heads):
        return att
    # Only the q/k/v/o shapes change; anything else the projections hold stays.
    proj = att.proj_params - gqa_proj(h, att.n_heads, att.n_kv_heads, att.head_dim) + gqa_proj(
        h, att.n_heads, n_kv, d)
    return replace(att, n_kv_heads=n_kv, head_dim=d, proj_params=proj)


def moe_block(cfg: Mapping[str, Any]) -> bool | None:
    """Gemma-4's ``enable_moe_block`` when the config states it (None: not said)."""
    if cfg.get("enable_moe_block") is None:
        return None
    return flag(cfg, "enable_moe_block")


def beside_experts(cfg: Mapping[str, Any]) -> int:
    """Width of the dense MLP a Gemma-4 MoE layer runs beside its experts (0: none)."""
    if not moe_block(cfg):
        return 0
    return count(cfg, "intermediate_size", hi=MAX_INTERMEDIATE)
