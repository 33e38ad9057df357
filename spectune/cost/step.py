"""The cost of one forward pass of B sequences x T new tokens at context S, per GPU, by
component (seed 000: C_verify = C_attn proj + C_MoE + C_attn, here with every other part
a real step pays: dense FFN, LM head, collectives and engine overhead)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from spectune.cost.attention import attention_work
from spectune.cost.comm import comm_component
from spectune.cost.dense import gemm_work, lm_head_work
from spectune.cost.moe import moe_work
from spectune.cost.roofline import Array, Component, Work, fixed, price
from spectune.deployment import Engine, Parallelism
from spectune.hardware import GPU
from spectune.model import Model, MoE

#: Display order of components.
ORDER = ("attn-proj", "attention-gqa", "attention-swa", "attention-mla", "attention-hca",
         "attention-csa", "indexer-csa", "dense-ffn", "moe", "lm-head", "comm", "overhead")


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


def layer_works(model: Model, par: Parallelism, B: Array, T: Array, S: Array) -> dict[str, Work]:
    """FLOPs and bytes of every roofline component of ``model``, summed over its layers."""
    h = model.hidden_size
    works: dict[str, Work] = {}
    for group in model.distinct_layers():
        att = group.attention
        for name, w in attention_work(att, model, par, B, T, S).items():
            _add(works, name, w.scaled(group.count))
        # q/k/v/o: the layer input and attention output are read, q/k/v and output written.
        proj = gemm_work(att.proj_params, 2 * h, 2 * h, model.weight_dtype, model.act_dtype,
                         par, B, T)
        _add(works, "attn-proj", proj.scaled(group.count))
        ffn = group.ffn
        if isinstance(ffn, MoE):
            w = moe_work(ffn, h, model.expert_dtype, model.act_dtype, par, B, T)
            _add(works, "moe", w.scaled(group.count))
        else:
            w = gemm_work(ffn.params(h), h + ffn.intermediate, 2 * ffn.intermediate + h,
                          model.weight_dtype, model.act_dtype, par, B, T)
            _add(works, "dense-ffn", w.scaled(group.count))
    _add(works, "lm-head", lm_head_work(model.head_vocab, h, model.lm_head_dtype,
                                        model.act_dtype, par, B, T))
    return works


def comm_cost(model: Model, gpu: GPU, par: Parallelism, B: Array, T: Array) -> Component | None:
    """Collectives of every layer, or None on a single GPU."""
    if par.tp == 1 and par.ep == 1:
        return None
    total: Component | None = None
    for group in model.distinct_layers():
        ffn = group.ffn
        top_k = ffn.top_k if isinstance(ffn, MoE) else 0
        c = comm_component(gpu, par, model.hidden_size, model.act_dtype, top_k,
                           isinstance(ffn, MoE), B, T).scaled(group.count)
        total = c if total is None else total + c
    return total


def overhead_seconds(model: Model, engine: Engine, par: Parallelism, B: Array, T: Array,
                     speculative: ArrayLike, role: str = "target") -> Array:
    """Engine time outside the kernels' rooflines for one pass (seconds): a fixed cost per
    pass and per layer, and per sequence in a target pass; a target pass on the speculative
    path adds the speculative step's fixed cost, a cost per sequence (B/dp) and a cost per
    verified token (B/dp * T per GPU)."""
    if role == "draft":
        return np.asarray(engine.draft_pass_overhead + engine.layer_overhead * model.n_layers)
    seqs = np.asarray(B, dtype=float) / par.dp
    base = engine.pass_overhead + engine.layer_overhead * model.n_layers + engine.sequence_cost * seqs
    tokens = seqs * T
    spec = engine.spec_step_overhead + engine.spec_sequence_cost * seqs + engine.verify_token_cost * tokens
    return base + np.where(speculative, spec, 0.0)


def step_cost(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
              B: ArrayLike, T: ArrayLike, S: ArrayLike, *, achieved: bool = True,
              speculative: ArrayLike | None = None, role: str = "target") -> StepCost:
    """Cost of one pass of ``model``: B sequences x T tokens each at context S (arrays
    broadcast). ``speculative`` (default T > 1) adds the per-verified-token engine cost;
    ``engine=None`` leaves engine overhead out (the pure roofline of seed 000)."""
    Ba = np.asarray(B, dtype=float)
    Ta = np.asarray(T, dtype=float)
    Sa = np.asarray(S, dtype=float)
    works = layer_works(model, par, Ba, Ta, Sa)
    comps = {name: price(w, gpu, achieved) for name, w in works.items()}
    comm = comm_cost(model, gpu, par, Ba, Ta)
    if comm is not None:
        comps["comm"] = comm
    if engine is not None:
        spec = Ta > 1 if speculative is None else speculative
        comps["overhead"] = fixed(overhead_seconds(model, engine, par, Ba, Ta, spec, role)
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
