"""The cost of one forward pass of B sequences x T new tokens at context S, per GPU, by
component (seed 000: C_verify = C_attn proj + C_MoE + C_attn, here with every other part
a real step pays: dense FFN, LM head, collectives and engine overhead)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from spectune.core.cost.attention import attention_work, prompt_attention_work
from spectune.core.cost.comm import comm_component
from spectune.core.cost.dense import gemm_work, lm_head_work
from spectune.core.cost.kernels import (
    attention_bandwidth_fraction,
    default_kernels,
    engine_kernels,
    gemm_flops_fraction,
    kernel_price,
)
from spectune.core.cost.moe import moe_price, moe_work
from spectune.core.cost.roofline import Array, Component, Work, fixed, price
from spectune.core.deployment import NO_ENGINE, Engine, Parallelism
from spectune.core.hardware import GPU, Kernels
from spectune.core.model import Attention, Model, MoE

#: Display order of components.
ORDER = ("attn-proj", "attention-gqa", "attention-swa", "attention-mla", "attention-hca",
         "attention-csa", "indexer-csa", "attention-dsa", "indexer-dsa", "attention-linear",
         "dense-ffn", "moe", "lm-head", "comm", "overhead")


@dataclass(frozen=True)
class StepCost:
    """Per-component cost of one pass, per GPU; ``works`` keeps the FLOPs/bytes split of
    the roofline components (not ``comm`` / ``overhead``)."""

    components: dict[str, Component]
    works: dict[str, Work]

    @property
    def seconds(self) -> Array:
        return sum((c.seconds for c in self.components.values()), start=np.zeros(()))


def _add(works: dict[str, Work], name: str, work: Work) -> None:
    works[name] = works[name] + work if name in works else work


def _add_c(comps: dict[str, Component], name: str, comp: Component) -> None:
    comps[name] = comps[name] + comp if name in comps else comp


#: Weight GEMM launches per layer: fused qkv + o; MLA's q_a, q_b, kv_a, the two absorbed
#: per-head BMMs and o. A gated FFN is gate_up + down.
GQA_PROJ_CALLS = 2
MLA_PROJ_CALLS = 6
FFN_CALLS = 2


def _attention_price(w: Work, name: str, att: Attention, par: Parallelism, kernels: Kernels,
                     gpu: GPU, seqs: Array | None) -> Component:
    """Kernel-true price of one attention (or indexer) component of a layer: the MLA-family
    kernel for latent attention and the indexer, the GQA kernel otherwise, at the bandwidth
    fraction of a decode step of ``seqs`` sequences per GPU (a GQA kernel parallelises over
    their KV heads too); ``seqs`` None: a prefill, whose query tiles fill the GPU (no
    parallelism discount)."""
    mla_like = bool(att.kv_lora_rank) or name.startswith("indexer")
    if seqs is None:
        parallel: Array = np.asarray(1e9)
    else:
        parallel = seqs if mla_like else seqs * max(att.n_kv_heads / par.tp, 1.0)
    return kernel_price(w, gpu, kernels.mla_call if mla_like else kernels.gqa_call,
                        attention_bandwidth_fraction(kernels, mla_like, parallel), gpu.flops_fraction)


def _layer_pieces(model: Model, par: Parallelism, B: Array, T: Array, S: Array,
                  on: tuple[Kernels, GPU] | None = None,
                  logit_positions: Array | None = None) -> tuple[dict[str, Work], dict[str, Component]]:
    """Work of every roofline component summed over layers and, given ``on`` = (kernels,
    GPU), its kernel-true price (:mod:`spectune.core.cost.kernels`); each distinct layer is
    priced once and scaled by its count. The LM head scores ``logit_positions`` positions
    per sequence (default T: every position, as a verify pass does)."""
    kernels, gpu = on if on is not None else (None, None)
    h = model.hidden_size
    works: dict[str, Work] = {}
    comps: dict[str, Component] = {}
    tokens = np.asarray(B, dtype=float) * T / par.dp
    seqs = np.asarray(B, dtype=float) / par.dp
    head_T = T if logit_positions is None else logit_positions

    def gemm(name: str, w: Work, calls: int, count: int, rows: Array = tokens) -> None:
        _add(works, name, w.scaled(count))
        if kernels is not None and gpu is not None:
            c = kernel_price(w, gpu, calls * kernels.gemm_call, kernels.gemm_bandwidth_fraction,
                             gemm_flops_fraction(kernels, rows))
            _add_c(comps, name, c.scaled(count))

    for group in model.distinct_layers():
        att = group.attention
        latent = bool(att.kv_lora_rank)
        for name, w in attention_work(att, model, par, B, T, S).items():
            _add(works, name, w.scaled(group.count))
            if kernels is not None and gpu is not None:
                c = _attention_price(w, name, att, par, kernels, gpu, seqs)
                _add_c(comps, name, c.scaled(group.count))
        # q/k/v/o: the layer input and attention output are read, q/k/v and output written.
        proj = gemm_work(att.proj_params, 2 * h, 2 * h, model.weight_dtype, model.act_dtype,
                         par, B, T)
        gemm("attn-proj", proj, MLA_PROJ_CALLS if latent else GQA_PROJ_CALLS, group.count)
        ffn = group.ffn
        if isinstance(ffn, MoE):
            if kernels is not None and gpu is not None:
                # one grouped-GEMM call, a tile pass per distinct expert, shared experts as GEMMs
                w, c = moe_price(ffn, h, model.expert_dtype, model.act_dtype, par, B, T,
                                 model.routing, kernels, gpu,
                                 FFN_CALLS * kernels.gemm_call if ffn.n_shared else 0.0)
                _add_c(comps, "moe", c.scaled(group.count))
            else:
                w = moe_work(ffn, h, model.expert_dtype, model.act_dtype, par, B, T, model.routing)
            _add(works, "moe", w.scaled(group.count))
        else:
            w = gemm_work(ffn.params(h), h + ffn.intermediate, 2 * ffn.intermediate + h,
                          model.weight_dtype, model.act_dtype, par, B, T)
            gemm("dense-ffn", w, FFN_CALLS, group.count)
    gemm("lm-head", lm_head_work(model.head_vocab, h, model.lm_head_dtype, model.act_dtype,
                                 par, B, head_T), 1, 1, seqs * head_T)
    return works, comps


def prompt_attention(model: Model, gpu: GPU, par: Parallelism, L: ArrayLike, S: ArrayLike, *,
                     achieved: bool = True) -> Component:
    """Attention (every attention and indexer component, all layers) of ONE prompt of L new
    tokens attending S positions on average, per GPU, in the prefill form
    (:func:`spectune.core.cost.attention.prompt_attention_work`). A prefill kernel's query
    tiles fill the GPU, so the attention kernel runs at its fitted fraction with no
    parallelism discount (the discount of :func:`attention_bandwidth_fraction` is for a decode
    step's few sequences); its fixed cost is one call per layer."""
    La, Sa = np.asarray(L, dtype=float), np.asarray(S, dtype=float)
    kernels = default_kernels(gpu)
    total = fixed(np.zeros(np.broadcast_shapes(La.shape, Sa.shape)))
    for group in model.distinct_layers():
        att = group.attention
        for name, w in prompt_attention_work(att, model, par, La, Sa).items():
            c = (_attention_price(w, name, att, par, kernels, gpu, None) if achieved
                 else price(w, gpu, False))
            total = total + c.scaled(group.count)
    return total


def layer_works(model: Model, par: Parallelism, B: Array, T: Array, S: Array) -> dict[str, Work]:
    """FLOPs and bytes of every roofline component of ``model``, summed over its layers."""
    return _layer_pieces(model, par, B, T, S)[0]


def comm_cost(model: Model, gpu: GPU, par: Parallelism, B: Array, T: Array,
              exchange: str = NO_ENGINE.ep_exchange) -> Component | None:
    """Collectives of every layer, or None on a single GPU; ``exchange``: the engine's
    expert-parallel exchange (``Engine.ep_exchange``)."""
    if par.tp == 1 and par.ep == 1:
        return None
    total: Component | None = None
    for group in model.distinct_layers():
        ffn = group.ffn
        top_k = ffn.top_k if isinstance(ffn, MoE) else 0
        c = comm_component(gpu, par, model.hidden_size, model.act_dtype, top_k,
                           isinstance(ffn, MoE), B, T, exchange).scaled(group.count)
        total = c if total is None else total + c
    return total


#: The vocabulary ``verify_token_cost`` is quoted for (Llama-3, 128,256 tokens: the models the
#: engine constants were derived on).
REFERENCE_VOCAB = 128_256


#: Weight formats whose GEMMs quantize their activations at run time: fp8 checkpoints run W8A8
#: with dynamic activation scales on fp8 hardware (vLLM's and SGLang's Fp8LinearMethod, per token
#: or per 128-group; nm-vllm#332 counts 4 `scaled_fp8_quant` a layer). Not int8: GPTQ / AWQ /
#: compressed-tensors 8-bit imports as the same dtype but mostly runs weight-only (W8A16). Not
#: nvfp4 (W4A4 does quantize, cvt_fp16_to_fp4 in SGLang's DeepSeek-R1-FP4 trace, InferenceX#863):
#: no engine count for it here.
QUANT_ACTIVATION_WEIGHTS = frozenset({"fp8"})


def small_kernel_seconds(model: Model, engine: Engine) -> float:
    """Seconds per pass of the small kernels no component prices, summed over ``model``'s
    layers: sum over layers of ``layer_overhead`` + ``moe_layer_overhead`` [MoE layer] +
    ``mla_layer_overhead`` [latent (MLA) attention] + ``quant_layer_overhead`` [the layer's
    weights, or its experts', in :data:`QUANT_ACTIVATION_WEIGHTS`]. Each engine term is its
    kernel count at about 1 us a kernel in a CUDA graph (profiles/engines/*.yaml cite them)."""
    quantized = model.weight_dtype in QUANT_ACTIVATION_WEIGHTS
    total = 0.0
    for group in model.distinct_layers():
        per_layer = engine.layer_overhead
        moe = isinstance(group.ffn, MoE)
        if quantized or (moe and model.expert_dtype in QUANT_ACTIVATION_WEIGHTS):
            per_layer += engine.quant_layer_overhead
        if moe:
            per_layer += engine.moe_layer_overhead
        if group.attention.kv_lora_rank:
            per_layer += engine.mla_layer_overhead
        total += group.count * per_layer
    return total


def overhead_seconds(model: Model, engine: Engine, par: Parallelism, B: Array, T: Array,
                     speculative: ArrayLike, role: str = "target", drafter_kind: str = "",
                     logit_positions: Array | None = None) -> Array:
    """Engine time outside the kernels' rooflines for one pass (seconds): a fixed cost per
    pass and per layer (:func:`small_kernel_seconds`), and per sequence in a target pass; a
    target pass on the speculative path adds the speculative cycle's fixed cost and a cost per
    sequence (B/dp). Every pass on the speculative path (verify and drafter) pays a cost per
    token whose logits it processes (B/dp * ``logit_positions`` per GPU, default T),
    ``verify_token_cost`` scaled by its LM head's vocabulary over :data:`REFERENCE_VOCAB`
    (softmax, top-k, rejection sampling and the logits traffic grow with the vocabulary)."""
    seqs = np.asarray(B, dtype=float) / par.dp
    tokens = seqs * (T if logit_positions is None else logit_positions)
    per_token = engine.verify_token_cost * model.head_vocab / REFERENCE_VOCAB
    layers = small_kernel_seconds(model, engine)
    if role == "draft":
        return engine.draft_overhead(drafter_kind) + layers + per_token * tokens
    base = engine.pass_overhead + layers + engine.sequence_cost * seqs
    spec = engine.spec_step_overhead + engine.spec_sequence_cost * seqs + per_token * tokens
    return base + np.where(speculative, spec, 0.0)


def step_cost(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
              B: ArrayLike, T: ArrayLike, S: ArrayLike, *, achieved: bool = True,
              speculative: ArrayLike | None = None, role: str = "target",
              drafter_kind: str = "", logit_positions: ArrayLike | None = None,
              ep_exchange: str | None = None, moe_kernel: str | None = None) -> StepCost:
    """Cost of one pass of ``model``: B sequences x T tokens each at context S (arrays
    broadcast). ``speculative`` (default T > 1) adds the per-verified-token engine cost;
    ``engine=None`` leaves engine overhead out (the pure roofline of seed 000).
    ``logit_positions``: positions per sequence whose logits the pass computes (LM head and
    per-token logits cost); default T, every position, as a verify pass scores them all.
    ``ep_exchange``: the expert-parallel exchange priced (default the engine's, DeepEP without
    one), for passes priced without engine terms on an engine (a prefill chunk); ``moe_kernel``
    likewise the fused-MoE kernel family (default the engine's, :func:`engine_kernels`)."""
    Ba = np.asarray(B, dtype=float)
    Ta = np.asarray(T, dtype=float)
    Sa = np.asarray(S, dtype=float)
    La = None if logit_positions is None else np.asarray(logit_positions, dtype=float)
    # achieved: kernel-true prices; peak: the pure roofline (seed 000)
    mk = moe_kernel or (engine or NO_ENGINE).moe_kernel
    on = (engine_kernels(default_kernels(gpu), mk), gpu) if achieved else None
    works, comps = _layer_pieces(model, par, Ba, Ta, Sa, on, La)
    if not achieved:
        comps = {name: price(w, gpu, achieved) for name, w in works.items()}
    comm = comm_cost(model, gpu, par, Ba, Ta, ep_exchange or (engine or NO_ENGINE).ep_exchange)
    if comm is not None:
        comps["comm"] = comm
    if engine is not None:
        spec = Ta > 1 if speculative is None else speculative
        comps["overhead"] = fixed(overhead_seconds(model, engine, par, Ba, Ta, spec, role, drafter_kind, La)
                                  + 0.0 * (Ba * Ta * Sa))
    ordered = {k: comps[k] for k in ORDER if k in comps}
    return StepCost(ordered, works)


def marginal_cost(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
                  B: ArrayLike, T: ArrayLike, S: ArrayLike, *, achieved: bool = True,
                  rel: float = 1e-3) -> dict[str, Array]:
    """r = d log C / d log(tokens) per component (seed 000), tokens grown through T at
    fixed B and S: 0 for a cost that does not grow with the verify width, 1 for one that
    grows in proportion. The overhead's speculative switch is held at its value at T."""
    Ta = np.asarray(T, dtype=float)
    spec = Ta > 1
    up = step_cost(model, gpu, par, engine, B, Ta * (1 + rel), S, achieved=achieved, speculative=spec)
    dn = step_cost(model, gpu, par, engine, B, Ta * (1 - rel), S, achieved=achieved, speculative=spec)
    step = np.log1p(rel) - np.log1p(-rel)
    out = {}
    for name in up.components:
        hi, lo = up.components[name].seconds, dn.components[name].seconds
        with np.errstate(divide="ignore", invalid="ignore"):
            out[name] = np.where((hi > 0) & (lo > 0), (np.log(hi) - np.log(lo)) / step, 0.0)
    hi_t, lo_t = up.seconds, dn.seconds
    out["total"] = (np.log(hi_t) - np.log(lo_t)) / step
    return out
