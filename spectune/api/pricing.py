"""What ``spectune cost`` and ``spectune speedup`` price, resolved from a profile and/or names,
and one forward pass priced for it.

A :class:`Target` is the GPU, model, parallelism and engine of one pass; the command line
and the library (:func:`spectune.cost`) build it the same way with :func:`resolve_target`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from spectune.base.errors import InputError
from spectune.core.acceptance import ALPHA_OPTION, Acceptance
from spectune.core.cost import StepCost, marginal_cost, step_cost
from spectune.core.deployment import (
    NO_ENGINE,
    Deployment,
    Engine,
    LengthClass,
    Parallelism,
    Workload,
    parallelism_problem,
)
from spectune.core.hardware import GPU
from spectune.core.memory import PROFILE_TOKENS, Memory, memory, parameter_counts, shared_prefix
from spectune.core.model import Drafter, Model
from spectune.documents.envelope import Document
from spectune.documents.families import DEFAULT_ENGINE


@dataclass(frozen=True)
class Target:
    """The hardware and software one pass runs on; ``deployment`` when it came from a profile.
    ``engine`` None: the pure roofline, no engine overheads."""

    gpu: GPU
    model: Model
    parallelism: Parallelism
    engine: Engine | None
    deployment: Deployment | None = None


def resolve_target(profile: Deployment | str | None = None, *, gpu: GPU | str | None = None,
                   model: Model | str | None = None, tp: int | None = None, ep: int | None = None,
                   dp: int | None = None, engine: Engine | str | None = None,
                   coactivation: float | None = None, dtypes: dict[str, str] | None = None) -> Target:
    """GPU, model, parallelism and engine from a profile, overridden by what is given.

    ``engine``: a built-in name, ``"none"`` for the pure roofline, or an :class:`Engine`;
    without a profile it defaults to ``"vllm"``. ``coactivation`` (0..1) overrides the MoE
    routing's co-activation (seed 003); ``dtypes`` (a profile's ``dtypes:`` keys) the model's
    storage dtypes. :class:`InputError` when neither a profile nor
    both ``gpu`` and ``model`` are given, or the parallelism is inconsistent."""
    from spectune.documents.profiles import load_deployment, load_engine, load_gpu, load_model

    dep = load_deployment(profile) if isinstance(profile, str) else profile
    if dep is None and not (gpu and model):
        raise InputError("give --gpu and --model, or --profile")
    g = load_gpu(gpu) if isinstance(gpu, str) else gpu or dep.gpu  # type: ignore[union-attr]
    m = load_model(model) if isinstance(model, str) else model or dep.model  # type: ignore[union-attr]
    if dtypes:
        from spectune.documents.user_model import with_dtypes

        m = with_dtypes(m, dtypes)
    base = dep.parallelism if dep else Parallelism()
    try:
        par = Parallelism(tp or base.tp, ep or base.ep, dp or base.dp)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    problem = parallelism_problem(m, par)
    if problem:
        raise InputError(problem)
    eng: Engine | None
    if isinstance(engine, Engine):
        eng = engine
    else:
        name = engine or (None if dep else DEFAULT_ENGINE)
        eng = None if name == "none" else (load_engine(name) if name else dep.engine)  # type: ignore[union-attr]
    return Target(g, with_coactivation(m, coactivation), par, eng, dep)


def with_coactivation(model: Model, coactivation: float | None) -> Model:
    """``model`` with its routing's co-activation set to ``coactivation`` (if given)."""
    if coactivation is None:
        return model
    if not model.is_moe:  # a dense model routes nothing: the option would be silently ignored
        raise InputError(f"--coactivation: {model.name} has no MoE layers (co-activation is a "
                         "property of expert routing)")
    return replace(model, routing=replace(model.routing, coactivation=coactivation,
                                          source="--coactivation"))


@dataclass(frozen=True)
class PassCost:
    """One forward pass of ``batch`` sequences x ``tokens`` new tokens at ``context``, per GPU:
    its cost by component (seconds, FLOP, bytes) and the marginal cost r of one more token
    (``marginal[name]``, and ``marginal["total"]``)."""

    target: Target
    batch: int
    tokens: int
    context: int
    achieved: bool
    step: StepCost
    marginal: dict[str, float]
    memory: Memory

    @property
    def feasible(self) -> bool:
        """Whether weights, KV cache and the engine reserve fit in one GPU's memory."""
        return bool(self.memory.feasible)

    @property
    def seconds(self) -> float:
        return float(self.step.seconds)

    def inputs(self) -> dict[str, Any]:
        from spectune.documents.results import memory_doc

        t = self.target
        total, active = parameter_counts(t.model)
        par = t.parallelism
        return {"gpu": t.gpu.name, "model": t.model.name, "batch": self.batch, "tokens": self.tokens,
                "context": self.context, "parallelism": {"tp": par.tp, "ep": par.ep, "dp": par.dp},
                "engine": t.engine.name if t.engine else None, "achieved": self.achieved,
                "routing": t.model.describe_routing(),
                "parameters_total": total, "parameters_active": active,
                "memory": memory_doc(self.memory)}

    def to_dict(self) -> Document:
        """Kind ``StepCost``."""
        from spectune.documents.results import step_cost_doc

        return step_cost_doc(self.step, self.marginal, self.inputs())


def price_pass(target: Target, batch: int, tokens: int, context: int, *, achieved: bool = True,
               lengths: tuple[LengthClass, ...] = ()) -> PassCost:
    """Price one pass (see :class:`PassCost`); ``achieved`` False: peak rates. With request
    ``lengths`` the pass is an aggregated worker's mean step: a ``prefill`` component carries
    the prompt tokens arriving per plain step (one token committed per sequence,
    :mod:`spectune.core.cost.prefill`)."""
    t = target
    c = step_cost(t.model, t.gpu, t.parallelism, t.engine, batch, tokens, context, achieved=achieved)
    r = marginal_cost(t.model, t.gpu, t.parallelism, t.engine, batch, tokens, context, achieved=achieved)
    dep = t.deployment  # the profile's shared prompt prefix is held once when its model is priced
    prefix = shared_prefix(dep) if dep is not None and t.model.name == dep.model.name else 0
    if lengths:
        from spectune.core.cost.prefill import prefill_cost

        pre = prefill_cost(t.model, t.gpu, t.parallelism, t.engine, lengths, batch, tokens, context, 1.0,
                           achieved=achieved, cached=float(prefix))
        c = StepCost({**c.components, "prefill": pre}, c.works)
    budget = t.engine.max_num_batched_tokens if t.engine is not None else PROFILE_TOKENS
    mem = memory(t.model, target_drafter(t), t.gpu, t.parallelism, batch, context, tokens - 1, budget,
                 shared_prefix=prefix)
    return PassCost(t, batch, tokens, context, achieved, c, {k: float(v) for k, v in r.items()}, mem)


def pass_lengths(target: Target, prompt_tokens: float | None,
                 output_tokens: float | None) -> tuple[LengthClass, ...]:
    """The request lengths ``spectune cost`` prices a prefill share for: the options', else an
    aggregated profile's (none for a decode-only worker or without lengths: one pass, as
    before); a note says so when a prefill share is priced."""
    from spectune.base.notes import notes
    from spectune.core.lengths import lengths_notes, with_lengths

    dep = target.deployment
    base = dep if dep is not None else Deployment("cost", target.gpu, target.model, Drafter("ngram", "none"),
                                                  target.parallelism, target.engine or NO_ENGINE,
                                                  Workload((1,), (1,)), Acceptance.iid(0.0))
    dep = with_lengths(base, prompt_tokens, output_tokens, contexts_given=True)
    if not dep.workload.aggregated:  # one pass of B x T tokens, as before: nothing to say
        return ()
    notes([*lengths_notes(dep.workload),
           "cost: the step is a mean: B x T decode tokens plus the prefill arriving per plain step "
           "(the 'prefill' component; one token committed per sequence)"])
    return dep.workload.lengths


def target_drafter(target: Target) -> Drafter:
    """The profile's drafter when the pass prices the profile's own model (its weights and
    KV share the GPU), else none."""
    dep = target.deployment
    if dep is not None and target.model.name == dep.model.name:
        return dep.drafter
    return Drafter("ngram", "none")


def speedup_deployment(target: Target, batch: int, context: int, *, drafter: Drafter | str | None = None,
                       draft_cost: float | None = None, alpha: float | None = None) -> Deployment:
    """The one-point deployment ``spectune speedup`` prices: the drafter is a cost ratio
    ``draft_cost`` (draft token / target step), else ``drafter`` (a built-in name or a
    :class:`Drafter`), else the profile's; acceptance i.i.d. ``alpha``, else the profile's."""
    from spectune.documents.profiles import load_drafter

    dep = target.deployment
    if draft_cost is not None:
        d = Drafter("cost_ratio", f"c={draft_cost}", cost_ratio=draft_cost)
    elif drafter is not None:
        d = load_drafter(drafter) if isinstance(drafter, str) else drafter
    elif dep is not None:
        d = dep.drafter
    else:
        raise InputError("give --draft-cost or --drafter (or --profile)")
    if alpha is not None:
        acc = Acceptance.iid(alpha, ALPHA_OPTION)
    elif dep is not None:
        acc = dep.acceptance
    else:
        raise InputError("give --alpha (or a --profile with acceptance)")
    return Deployment("cli", target.gpu, target.model, d, target.parallelism, target.engine or NO_ENGINE,
                      Workload((batch,), (context,)), acc)
