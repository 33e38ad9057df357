"""The public API, part four: what explains a recommendation -- the cost of one forward pass
by component, one gamma's speedup, width against depth (``spectune cost``, ``speedup``,
``widthdepth``). Import it as :mod:`spectune.api`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spectune.api.profiles import deployment
from spectune.documents.envelope import Document

if TYPE_CHECKING:
    from spectune.api.pricing import PassCost
    from spectune.core.deployment import Deployment, Engine
    from spectune.core.hardware import GPU
    from spectune.core.memory import Memory
    from spectune.core.model import Drafter, Model
    from spectune.core.speedup import PointSpeedup


def _dtypes(dtypes: Sequence[str] | Mapping[str, str]) -> dict[str, str] | None:
    """``--dtype KEY=DTYPE`` strings (or a mapping) as the mapping the pricing takes."""
    if isinstance(dtypes, Mapping):
        return dict(dtypes) or None
    from spectune.documents.user_model import parse_dtypes

    return parse_dtypes(tuple(dtypes)) or None


def costs(profile: Deployment | str | Path | None = None, *, gpu: GPU | str | None = None,
          model: Model | str | None = None, batches: Sequence[int] = (1,), tokens: int = 1, context: int = 0,
          tp: int | None = None, ep: int | None = None, dp: int | None = None,
          engine: Engine | str | None = None, achieved: bool = True,
          coactivation: float | None = None, prompt_tokens: float | None = None,
          output_tokens: float | None = None,
          dtypes: Sequence[str] | Mapping[str, str] = ()) -> list[PassCost]:
    """:func:`cost` at each of ``batches`` (``spectune cost --batch B --batch B2 ...``);
    ``document(list)`` is the sweep."""
    from spectune.api.pricing import pass_lengths, price_pass, resolve_target

    target = resolve_target(deployment(profile) if profile is not None else None, gpu=gpu, model=model,
                            tp=tp, ep=ep, dp=dp, engine=engine, coactivation=coactivation,
                            dtypes=_dtypes(dtypes))
    lengths = pass_lengths(target, prompt_tokens, output_tokens)
    return [price_pass(target, b, tokens, context, achieved=achieved, lengths=lengths) for b in batches]


def cost(profile: Deployment | str | Path | None = None, *, gpu: GPU | str | None = None,
         model: Model | str | None = None, batch: int = 1, tokens: int = 1, context: int = 0,
         tp: int | None = None, ep: int | None = None, dp: int | None = None,
         engine: Engine | str | None = None, achieved: bool = True,
         coactivation: float | None = None, prompt_tokens: float | None = None,
         output_tokens: float | None = None, dtypes: Sequence[str] | Mapping[str, str] = ()) -> PassCost:
    """One forward pass of ``batch`` sequences x ``tokens`` new tokens at ``context`` tokens
    of KV cache, per GPU, by component, with the marginal cost r of each (``spectune cost``).

    GPU, model, parallelism and engine come from ``profile`` and/or are given (names of
    built-ins or objects); ``engine="none"`` is the pure roofline, ``achieved=False`` peak
    rates; ``coactivation`` the MoE routing's F; ``dtypes`` ``KEY=DTYPE`` storage overrides
    (``--dtype``). ``prompt_tokens`` / ``output_tokens`` (or an aggregated profile's
    lengths): the pass is the mean step with a ``prefill`` component."""
    return costs(profile, gpu=gpu, model=model, batches=(batch,), tokens=tokens, context=context, tp=tp,
                 ep=ep, dp=dp, engine=engine, achieved=achieved, coactivation=coactivation,
                 prompt_tokens=prompt_tokens, output_tokens=output_tokens, dtypes=dtypes)[0]


def memory_warning(mem: Memory, batch: int, context: int) -> str | None:
    """Why one operating point (``mem`` of a :class:`PassCost` or of the speedup) does not fit
    the GPU's memory, or None when it fits. The step is still priced: studying a GPU's
    roofline beyond what it holds is legitimate."""
    from spectune.core.memory import infeasible_reason

    if bool(mem.feasible):
        return None
    return f"batch {batch} at context {context:,} does not fit in memory: {infeasible_reason(mem, ())}"


@dataclass(frozen=True)
class SpeedupResult:
    """One gamma's speedup (``spectune speedup``): ``point`` (None for the closed form), its
    ``document`` (kind ``Speedup``), ``notes`` and ``warnings`` (a point beyond memory)."""

    point: PointSpeedup | None
    document: Document
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def speedup_result(profile: Deployment | str | Path | None = None, *, gamma: int,
                   batch: int | None = None, context: int | None = None, gpu: GPU | str | None = None,
                   model: Model | str | None = None, drafter: Drafter | str | None = None,
                   draft_cost: float | None = None, alpha: float | None = None,
                   engine: Engine | str | None = None, tp: int | None = None, ep: int | None = None,
                   dp: int | None = None, dtypes: Sequence[str] | Mapping[str, str] = (),
                   calibration: str | Path | None = None, prompt_tokens: float | None = None,
                   output_tokens: float | None = None) -> SpeedupResult:
    """Without ``profile``, ``gpu`` and ``model``: the closed form of Leviathan et al. (2023)
    with a free verify at ``alpha``, ``gamma`` and ``draft_cost``. Otherwise the roofline
    speedup at (``batch``, ``context``), as :func:`speedup` (whose options it takes)."""
    from spectune.base.errors import InputError

    if not (profile or gpu or model):
        if alpha is None:
            raise InputError("--alpha is required for the closed form")
        from spectune.documents.results import closed_form_doc

        return SpeedupResult(None, closed_form_doc(alpha, gamma, draft_cost or 0.0))
    if batch is None or context is None:
        raise InputError("the roofline speedup needs --batch and --context")
    from spectune.api.pricing import resolve_target, speedup_deployment
    from spectune.core.lengths import lengths_notes, with_lengths
    from spectune.core.memory import memory
    from spectune.core.priors import assumed_note
    from spectune.core.speedup import point_speedup
    from spectune.documents.results import point_speedup_doc

    where = resolve_target(deployment(profile) if profile is not None else None, gpu=gpu, model=model,
                           tp=tp, ep=ep, dp=dp, engine=engine, dtypes=_dtypes(dtypes))
    target = speedup_deployment(where, batch, context, drafter=drafter, draft_cost=draft_cost, alpha=alpha)
    warning = memory_warning(memory(target.model, target.drafter, target.gpu, target.parallelism, batch,
                                    context, gamma), batch, context)
    if calibration is not None:
        from spectune.documents.calibration import apply_calibration, load_calibration

        target = apply_calibration(target, load_calibration(calibration))
    target = with_lengths(target, prompt_tokens, output_tokens, contexts_given=True)
    found = [n for n in (assumed_note(target.acceptance), *lengths_notes(target.workload)) if n]
    point = point_speedup(target, batch, context, gamma)
    return SpeedupResult(point, point_speedup_doc(target, batch, context, gamma, point), tuple(found),
                         (warning,) if warning else ())


def speedup(profile: Deployment | str | Path | None = None, *, gamma: int, batch: int, context: int,
            gpu: GPU | str | None = None, model: Model | str | None = None,
            drafter: Drafter | str | None = None, draft_cost: float | None = None,
            alpha: float | None = None, engine: Engine | str | None = None, tp: int | None = None,
            ep: int | None = None, dp: int | None = None, dtypes: Sequence[str] | Mapping[str, str] = (),
            calibration: str | Path | None = None, prompt_tokens: float | None = None,
            output_tokens: float | None = None) -> PointSpeedup:
    """The roofline speedup of draft length ``gamma`` at one (batch, context) point
    (``spectune speedup``): expected tokens, plain, verify and draft step seconds, speedup.
    GPU, model, parallelism, engine and ``dtypes`` as :func:`cost` takes them; ``drafter`` (a
    built-in name or a Drafter) or ``draft_cost`` (draft token / target step); ``alpha``
    (i.i.d. acceptance); ``calibration`` (a ``calibrate -o yaml`` file); ``prompt_tokens`` /
    ``output_tokens``: the aggregated, diluted speedup. :func:`speedup_result` also gives the
    document, the notes and the memory warning."""
    if not (profile or gpu or model):
        from spectune.base.errors import InputError

        raise InputError("the roofline speedup needs a profile, or a gpu and a model")
    point = speedup_result(profile, gamma=gamma, batch=batch, context=context, gpu=gpu, model=model,
                           drafter=drafter, draft_cost=draft_cost, alpha=alpha, engine=engine, tp=tp, ep=ep,
                           dp=dp, dtypes=dtypes, calibration=calibration, prompt_tokens=prompt_tokens,
                           output_tokens=output_tokens).point
    assert point is not None  # a profile, gpu or model: the roofline, never the closed form
    return point


def widthdepth(profile: Deployment | str | Path, *, positions: int, batch: int | None = None,
               alpha: float | None = None, context: int = 0, coactivation: float | None = None,
               with_drafter: bool = False, with_engine: bool = False) -> Document:
    """Seed 003's question (``spectune widthdepth``): ``positions`` per step spent as width
    (that many sequences) or as depth (``batch`` sequences, default positions / 2, each
    verifying positions / batch); kind ``WidthDepth``. ``alpha``: i.i.d. acceptance instead
    of the profile's; ``coactivation`` overrides the MoE routing's F; the drafter and the
    engine's overheads are priced only when asked (the seed takes them as free)."""
    from spectune.api.pricing import with_coactivation
    from spectune.base.errors import InputError
    from spectune.core.acceptance import ALPHA_OPTION, Acceptance
    from spectune.core.widthdepth import width_vs_depth
    from spectune.documents.results import widthdepth_doc

    dep = deployment(profile)
    b = batch or max(1, positions // 2)
    if positions % b:
        raise InputError(f"--positions {positions} must be a multiple of --batch {b}")
    model = with_coactivation(dep.model, coactivation)
    acc = Acceptance.iid(alpha, ALPHA_OPTION) if alpha is not None else dep.acceptance
    eng = dep.engine if with_engine else None
    drafter = dep.drafter if with_drafter else None
    wd = width_vs_depth(model, dep.gpu, dep.parallelism, eng, acc, positions, b, context, drafter)
    par = dep.parallelism
    inputs = {"gpu": dep.gpu.name, "model": model.name,
              "routing": model.describe_routing(),
              "acceptance": acc.source, "engine": eng.name if eng else None,
              "drafter": drafter.name if drafter else None,
              "parallelism": {"tp": par.tp, "ep": par.ep, "dp": par.dp}, "achieved": True}
    return widthdepth_doc(wd, inputs)
