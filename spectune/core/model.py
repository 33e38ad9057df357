"""What a transformer is, as far as the cost of a forward pass cares.

A model is a stack of layer groups (``count`` identical layers each); a layer is an
attention block plus a feed-forward block. Sizes are element counts; dtypes are storage
formats from :data:`spectune.core.hardware.DTYPE_BYTES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ATTENTION_KINDS = ("gqa", "mla", "hca", "csa", "dsa", "swa", "linear")


@dataclass(frozen=True)
class Attention:
    """One attention block.

    kind:
      ``gqa``  multi-head / grouped-query / multi-query attention over the whole context
               (MHA is n_kv_heads == n_heads, MQA n_kv_heads == 1);
      ``swa``  the same over the last ``window`` tokens only;
      ``mla``  multi-head latent attention, priced in its absorbed (MQA) decode form: one
               latent of ``kv_lora_rank`` + ``rope_dim`` per token shared by all heads
               (seed 000, appendix);
      ``hca``  DeepSeek-V4 heavily compressed attention: MLA over the context compressed
               ``compress_ratio``-fold (128), plus an uncompressed local ``window``;
      ``csa``  DeepSeek-V4 compressed sparse attention: an indexer of ``index_n_heads`` x
               ``index_head_dim`` scores every position of the ``compress_ratio``-fold (4)
               compressed context, then MLA over the top ``index_topk``, plus ``window``;
      ``dsa``  DeepSeek-V3.2 sparse attention: the same indexer over the whole
               (uncompressed) context, then MLA over the top ``index_topk`` positions;
      ``linear`` linear attention (Qwen3-Next / Qwen3.5 gated DeltaNet): no KV cache, a
               fixed recurrent state of ``n_heads`` (value heads) x ``key_dim`` x
               ``head_dim`` (value dim) per sequence in ``state_dtype``, ``n_kv_heads``
               key heads, and a causal conv of ``conv_kernel`` taps.
    ``v_head_dim``: an MLA value head's width, for the prefill's uncompressed (MHA) form
    (0: ``head_dim - rope_dim``, DeepSeek-V3's 128 = its qk_nope_head_dim).
    ``proj_params`` counts the weights of the block's projections (q/k/v/o or MLA's low-rank
    q, kv and output maps), per layer, unsharded.
    """

    kind: str
    n_heads: int
    n_kv_heads: int
    head_dim: int
    proj_params: int
    kv_lora_rank: int = 0
    rope_dim: int = 0
    window: int = 0
    compress_ratio: int = 1
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    key_dim: int = 0
    conv_kernel: int = 0
    state_dtype: str = "fp32"
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ATTENTION_KINDS:
            raise ValueError(f"attention kind {self.kind!r} is not one of {ATTENTION_KINDS}")


@dataclass(frozen=True)
class DenseFFN:
    """A dense (gated, SwiGLU-style unless ``gated`` is false) feed-forward block."""

    intermediate: int
    gated: bool = True

    def params(self, hidden: int) -> int:
        return (3 if self.gated else 2) * hidden * self.intermediate


@dataclass(frozen=True)
class MoE:
    """A mixture-of-experts block: ``top_k`` of ``n_experts`` routed experts per token,
    plus ``n_shared`` always-on shared experts of ``shared_intermediate`` each."""

    n_experts: int
    top_k: int
    expert_intermediate: int
    n_shared: int = 0
    shared_intermediate: int = 0
    gated: bool = True

    def expert_params(self, hidden: int) -> int:
        """Weights of one routed expert."""
        return (3 if self.gated else 2) * hidden * self.expert_intermediate

    def shared_params(self, hidden: int) -> int:
        """Weights of all shared experts together."""
        inter = self.shared_intermediate or self.expert_intermediate
        return self.n_shared * (3 if self.gated else 2) * hidden * inter


FFN = DenseFFN | MoE


@dataclass(frozen=True)
class Routing:
    """How a model's router spreads tokens over its routed experts (seed 003), as far as
    the distinct-expert traffic of a pass cares; the arithmetic is in
    :mod:`spectune.core.cost.routing`.

    ``coactivation`` F: the share of a token's routed experts that the previous position
    of the same sequence also used (measured; chance level is sum(pi^2)/k, k/E if
    uniform). ``decay``: rank-share law share(r) ~ exp(-decay * r / E), r = 0 the busiest
    expert (the busiest pulls ~decay / (1 - e^-decay) times its fair share). ``loads``:
    measured per-expert load shares, one row for every MoE layer or one row per layer
    (overrides ``decay``). All zero / empty is uniform routing: seed 000's coupon collector,
    exactly.
    """

    coactivation: float = 0.0
    decay: float = 0.0
    loads: tuple[tuple[float, ...], ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.coactivation <= 1.0:
            raise ValueError(f"coactivation {self.coactivation} is outside [0, 1]")
        if self.decay < 0:
            raise ValueError(f"decay {self.decay} must be >= 0")

    @property
    def uniform(self) -> bool:
        return self.coactivation == 0.0 and self.decay == 0.0 and not self.loads

    def describe(self) -> str:
        """One line for outputs: which routing model priced the experts."""
        if self.uniform:
            what = "uniform (coupon collector)"
        else:
            skew = (f"measured loads ({len(self.loads)} layer row(s))" if self.loads
                    else f"exponential rank decay {self.decay:g}" if self.decay else "no skew")
            what = f"co-activation F = {self.coactivation:g}, {skew}"
        return f"{what}; {self.source}" if self.source else what


UNIFORM = Routing()


@dataclass(frozen=True)
class LayerGroup:
    """``count`` consecutive layers with the same attention and feed-forward blocks."""

    count: int
    attention: Attention
    ffn: FFN


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer.

    ``weight_dtype`` is the storage of attention projections and dense FFNs,
    ``expert_dtype`` of routed and shared experts, ``kv_dtype`` of the KV cache,
    ``act_dtype`` of activations and attention queries, ``lm_head_dtype`` of the output
    embedding. ``lm_head_vocab`` is the vocabulary the head scores (an EAGLE-3 head's
    reduced draft vocabulary), defaulting to ``vocab_size``. ``tied_embeddings``: the head
    is the input embedding (``tie_word_embeddings``): one tensor in memory. ``routing``
    prices the MoE layers' distinct experts (uniform unless a profile says otherwise).
    """

    name: str
    hidden_size: int
    vocab_size: int
    layers: tuple[LayerGroup, ...]
    weight_dtype: str = "bf16"
    expert_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    lm_head_dtype: str = "bf16"
    lm_head_vocab: int = 0
    tied_embeddings: bool = False
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    routing: Routing = UNIFORM

    @property
    def n_layers(self) -> int:
        return sum(g.count for g in self.layers)

    def distinct_layers(self) -> tuple[LayerGroup, ...]:
        """Identical layers merged whatever their order (cost does not depend on order):
        DeepSeek-V4's alternating CSA/HCA stack is priced as 3 groups, not 42."""
        counts: dict[tuple[Attention, DenseFFN | MoE], int] = {}
        for g in self.layers:
            counts[(g.attention, g.ffn)] = counts.get((g.attention, g.ffn), 0) + g.count
        return tuple(LayerGroup(n, a, f) for (a, f), n in counts.items())

    @property
    def head_vocab(self) -> int:
        return self.lm_head_vocab or self.vocab_size

    @property
    def is_moe(self) -> bool:
        return any(isinstance(g.ffn, MoE) for g in self.layers)

    def describe_routing(self) -> str:
        """One line for outputs: the routing model that priced the experts, or that there are none."""
        return self.routing.describe() if self.is_moe else "none (dense model)"

    def total_params(self) -> int:
        """All weights (embedding, layers, head), for display and sanity checks."""
        n = 2 * self.vocab_size * self.hidden_size
        for g in self.layers:
            ffn = g.ffn
            ffn_p = (
                ffn.params(self.hidden_size)
                if isinstance(ffn, DenseFFN)
                else ffn.n_experts * ffn.expert_params(self.hidden_size)
                + ffn.shared_params(self.hidden_size)
            )
            n += g.count * (g.attention.proj_params + ffn_p)
        return n


DRAFTER_KINDS = ("draft_model", "eagle", "eagle3", "mtp", "ngram", "cost_ratio")


@dataclass(frozen=True)
class Drafter:
    """Where draft tokens come from and what producing them costs.

    ``draft_model``: a separate small model (``model``), gamma sequential passes.
    ``eagle`` / ``eagle3`` / ``mtp``: a head of ``model.layers`` (usually one layer) plus an
    LM head, run gamma times sequentially on the target's hidden states.
    ``ngram``: prompt lookup, no accelerator work.
    ``cost_ratio``: the user states c = cost of one draft token / cost of a plain step.
    ``path`` is what the serving engine is told to load (a Hugging Face id or directory).
    ``prompt_lookup_min`` / ``prompt_lookup_max`` (n-gram only): the shortest and longest
    n-gram matched against earlier text (vLLM ``prompt_lookup_min/max``); they decide what
    is drafted and hence the acceptance, so they travel into the emitted config. 0: unset.
    ``topk`` / ``num_draft_tokens`` (model drafters): a draft tree as SGLang runs it
    (``--speculative-eagle-topk`` branches kept per step, ``--speculative-num-draft-tokens``
    verified per sequence); topk 1 is a chain (:mod:`spectune.core.tree`).
    """

    kind: str
    name: str = ""
    model: Model | None = None
    cost_ratio: float = 0.0
    path: str = ""
    prompt_lookup_min: int = 0
    prompt_lookup_max: int = 0
    topk: int = 1
    num_draft_tokens: int = 0

    def __post_init__(self) -> None:
        if self.kind not in DRAFTER_KINDS:
            raise ValueError(f"drafter kind {self.kind!r} is not one of {DRAFTER_KINDS}")
        if self.kind in ("draft_model", "eagle", "eagle3", "mtp") and self.model is None:
            raise ValueError(f"a {self.kind} drafter needs a model")
