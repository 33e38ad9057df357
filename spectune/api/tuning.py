"""The public API, part two: the tuning itself -- gamma* per operating point with what goes
beside it (the batch mix, the ragged simulation, the SLO goodput), the serving-engine
settings, the cost of one pass, one gamma's speedup, width against depth, the calibration
of engine constants (``spectune recommend``, ``emit``, ``report``, ``cost``, ``speedup``,
``widthdepth``, ``calibrate``). Import it as :mod:`spectune.api`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.api.profiles import deployment, load_observation
from spectune.api.profiles import observation as observation_of
from spectune.documents.envelope import Document

if TYPE_CHECKING:
    from spectune.core.deployment import Deployment, Engine
    from spectune.core.hardware import GPU
    from spectune.core.memory import Memory
    from spectune.core.model import Drafter, Model
    from spectune.core.ragged import RaggedGrid
    from spectune.core.recommend import Recommendation
    from spectune.core.slo import Goodput
    from spectune.core.speedup import PointSpeedup
    from spectune.documents.observation import Observation
    from spectune.engines.emit import Snippet
    from spectune.pricing import PassCost

# The file SGLang's --speculative-adaptive-config points at (spectune.engines.sglang's default).
DEFAULT_ADAPTIVE_PATH = "spectune-sglang-adaptive.json"


@dataclass(frozen=True)
class Tuning:
    """A recommendation and what its settings and report need beside it: ``batch_mix`` the
    share of time at each batch size (observed, with given entries laid over it; None:
    unknown), ``mix_note`` why an observation gave no batch mix (None otherwise). The notes
    (observation, extrapolation, lengths) are in ``recommendation.notes``."""

    recommendation: Recommendation
    batch_mix: dict[int, float] | None
    mix_note: str | None = None


def tune(profile: Deployment | str | Path, *, observation: Observation | str | Path | None = None,
         match: Sequence[str] = (), alpha: float | None = None, batch_sizes: Sequence[int] = (),
         context_lengths: Sequence[int] = (), gamma_max: int | None = None,
         calibration: str | Path | None = None, prompt_tokens: float | None = None,
         output_tokens: float | None = None, batch_mix: Mapping[int, float] | None = None,
         engine_version: str | None = None) -> Tuning:
    """:func:`recommend` with the batch mix kept (what ``spectune recommend``, ``emit`` and
    ``report`` share). ``batch_mix`` (batch size -> weight) is laid over the observed mix;
    ``engine_version`` (a release such as ``0.24.0``) replaces the engine profile's."""
    from spectune.core.lengths import with_lengths
    from spectune.core.recommend import recommend as run
    from spectune.overrides import prepare

    dep = deployment(profile)
    if engine_version is not None:
        from spectune.engines.engine_version import parse_engine_version

        dep = replace(dep, engine=replace(dep.engine, version=parse_engine_version(engine_version)))
    if calibration is not None:
        from spectune.documents.calibration import apply_calibration, load_calibration

        dep = apply_calibration(dep, load_calibration(calibration))
    obs = observation_of(observation, match)  # match: only a file's groups
    prepared = prepare(dep, observation=obs, alpha=alpha, batch_sizes=batch_sizes,
                       context_lengths=context_lengths, gamma_max=gamma_max, batch_mix=batch_mix)
    rec = run(with_lengths(prepared.deployment, prompt_tokens, output_tokens,
                           contexts_given=bool(context_lengths)))
    if prepared.notes:
        rec = replace(rec, notes=prepared.notes + rec.notes)
    mix_note = None
    if obs is not None and prepared.observed_mix is None:
        from spectune.observe.apply import missing_mix_note

        mix_note = missing_mix_note(obs, str(observation) if isinstance(observation, (str, Path)) else "")
    return Tuning(rec, prepared.batch_mix, mix_note)


def recommend(profile: Deployment | str | Path, *, observation: Observation | str | Path | None = None,
              match: Sequence[str] = (), alpha: float | None = None, batch_sizes: Sequence[int] = (),
              context_lengths: Sequence[int] = (), gamma_max: int | None = None,
              calibration: str | Path | None = None, prompt_tokens: float | None = None,
              output_tokens: float | None = None) -> Recommendation:
    """gamma* and its predicted speedup at every (batch size, context length) of ``profile``.

    ``observation`` (an :class:`Observation` or an ``observe -o yaml`` file; ``match``
    LABEL=VALUE strings pick one group of an ``observe --prometheus`` file) replaces the
    acceptance and operating points with measured ones; ``alpha`` (i.i.d. acceptance),
    ``batch_sizes``, ``context_lengths`` and ``gamma_max`` override the profile, as the
    same options of ``spectune recommend`` do; ``calibration`` (a ``calibrate -o yaml``
    file) replaces the engine constants with the fitted ones; ``prompt_tokens`` and
    ``output_tokens`` (mean tokens per request, together) price an aggregated worker's
    prefill (``--prompt-tokens`` / ``--output-tokens``). The notes (observation,
    extrapolation, lengths) are in ``.notes``. :func:`extras` adds the ragged simulation
    and the SLO goodput."""
    return tune(profile, observation=observation, match=match, alpha=alpha, batch_sizes=batch_sizes,
                context_lengths=context_lengths, gamma_max=gamma_max, calibration=calibration,
                prompt_tokens=prompt_tokens, output_tokens=output_tokens).recommendation


@dataclass(frozen=True)
class Extras:
    """What ``recommend --ragged`` / ``--tpot-slo`` add to a recommendation: the ragged-depth
    simulation (None unless asked), the goodput under the TPOT target (None without one) and
    the notes that go with them."""

    ragged: RaggedGrid | None = None
    goodput: Goodput | None = None
    notes: tuple[str, ...] = ()


def extras(rec: Recommendation | Deployment, *, ragged: bool = False, rounds: str | Path | None = None,
           tpot_slo: float | str | None = None) -> Extras:
    """The ragged-depth simulation (``ragged``; from recorded draft ``rounds``, a JSON Lines
    file, instead of the two-population fit when given) and the goodput under ``tpot_slo``
    (seconds, or a duration such as ``"25ms"``; default the profile's ``slo.tpot_ms``) for the
    deployment of ``rec``. The simulators load only when asked for."""
    from spectune.core.recommend import Recommendation
    from spectune.errors import InputError
    from spectune.limits import MAX_TPOT_SECONDS

    dep = rec.deployment if isinstance(rec, Recommendation) else rec
    grid = good = None
    found: list[str] = []
    if ragged or rounds is not None:
        from spectune.core.ragged import HEADROOM_NOTE, rounds_for, simulate

        if rounds is not None:
            from spectune.documents.rounds_file import load_rounds

            drafted = load_rounds(str(rounds))
        else:
            drafted = rounds_for(dep)
        grid = simulate(dep, drafted)
        found.append(HEADROOM_NOTE)
    slo = dep.tpot_slo
    if isinstance(tpot_slo, str):
        from spectune.core.slo import parse_duration

        try:
            slo = parse_duration(tpot_slo)
        except ValueError:
            raise InputError("--tpot-slo expects a duration such as 25ms or 0.025s, at most "
                             f"{MAX_TPOT_SECONDS:g} s, got {tpot_slo[:40]!r}") from None
    elif tpot_slo is not None:
        if not 0 < tpot_slo <= MAX_TPOT_SECONDS:
            raise InputError(f"tpot_slo {tpot_slo!r}: expected seconds > 0 and at most {MAX_TPOT_SECONDS:g}")
        slo = float(tpot_slo)
    if slo is not None:
        from spectune.core.slo import goodput

        good = goodput(dep, slo)
    return Extras(grid, good, tuple(found))


def report(profile: Deployment | str | Path, **options: Any) -> tuple[Tuning, list[tuple[str, str]]]:
    """What ``spectune report`` draws: the :func:`tune` of ``profile`` (``options`` as it
    takes them) and the source of every built-in the deployment uses (name, where). The page
    itself is :func:`spectune.render.report.report_html`."""
    from spectune.documents.profiles import builtin_sources

    tuned = tune(profile, **options)
    return tuned, builtin_sources(tuned.recommendation.deployment)


def document(result: Any, extra: Extras | None = None) -> Document:
    """The versioned document of a result of this API (what ``-o yaml|json`` prints):
    a Recommendation (with its :class:`Extras`), PassCost (a list of them: the sweep),
    Observation, CheckResult, or a document (returned as is)."""
    from spectune.core.recommend import Recommendation

    if isinstance(result, dict) and "apiVersion" in result:
        return result
    if isinstance(result, Recommendation):
        from spectune.documents.results import recommendation_doc

        return recommendation_doc(result, *((extra.ragged, extra.goodput) if extra else ()))
    if isinstance(result, (list, tuple)):
        from spectune.documents.results import sweep_doc

        docs = [document(r) for r in result]
        return docs[0] if len(docs) == 1 else sweep_doc(docs)
    to_dict = getattr(result, "to_dict", None)  # PassCost, Observation
    if callable(to_dict):
        doc: Document = to_dict()
        return doc
    report = getattr(result, "document", None)  # CheckResult
    if isinstance(report, dict):
        return report
    raise TypeError(f"no document for a {type(result).__name__}")


def emit(rec: Recommendation | Tuning, kind: str, *, observation: Observation | str | Path | None = None,
         batch_mix: Mapping[int, float] | None = None,
         adaptive_path: str = DEFAULT_ADAPTIVE_PATH) -> Snippet:
    """The serving-engine settings for ``rec`` (``spectune emit``): ``kind`` one of
    ``vllm``, ``vllm-yaml``, ``vllm-python``, ``sglang``, ``sglang-adaptive-config``.

    Where one static gamma must serve every batch size, it is chosen for the observed batch
    mix of ``observation`` (or of the :class:`Tuning`) and/or ``batch_mix`` (batch size ->
    weight; its entries win). Returns ``.text`` (the snippet) and ``.notes``."""
    from spectune.engines.emit import build_snippet

    mix: dict[int, float] = {}
    if isinstance(rec, Tuning):
        mix.update(rec.batch_mix or {})
        rec = rec.recommendation
    obs = load_observation(observation) if isinstance(observation, (str, Path)) else observation
    if obs is not None:
        from spectune.observe.apply import apply_observation

        mix.update(apply_observation(rec.deployment, obs).batch_mix or {})
    mix.update(batch_mix or {})
    return build_snippet(rec, kind, mix or None, adaptive_path=adaptive_path)


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
    from spectune.pricing import pass_lengths, price_pass, resolve_target

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
    from spectune.errors import InputError

    if not (profile or gpu or model):
        if alpha is None:
            raise InputError("--alpha is required for the closed form")
        from spectune.documents.results import closed_form_doc

        return SpeedupResult(None, closed_form_doc(alpha, gamma, draft_cost or 0.0))
    if batch is None or context is None:
        raise InputError("the roofline speedup needs --batch and --context")
    from spectune.core.lengths import lengths_notes, with_lengths
    from spectune.core.memory import memory
    from spectune.core.priors import assumed_note
    from spectune.core.speedup import point_speedup
    from spectune.documents.results import point_speedup_doc
    from spectune.pricing import resolve_target, speedup_deployment

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
        from spectune.errors import InputError

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
    from spectune.core.acceptance import ALPHA_OPTION, Acceptance
    from spectune.core.widthdepth import width_vs_depth
    from spectune.documents.results import widthdepth_doc
    from spectune.errors import InputError
    from spectune.pricing import with_coactivation

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


def calibrate(profile: Deployment | str | Path,
              observations: Sequence[Observation | str | Path]) -> Document:
    """Fit ``profile``'s engine constants to the step times of observed windows of its own
    server (``spectune calibrate``): ``observe -o yaml`` files or Observations, speculation
    off and on, at one or more concurrencies. Returns the Calibration document (its
    ``notes`` say what the windows could not separate); pass its file to
    ``recommend(..., calibration=FILE)``. Too few or unusable windows: InputError."""
    from spectune.core.calibrate import CalibrationError
    from spectune.documents.calibration import calibrate_observations
    from spectune.errors import InputError, ObserveUsageError

    names = [str(o) if isinstance(o, (str, Path)) else f"observation[{i}]"
             for i, o in enumerate(observations)]
    try:
        obs = [load_observation(o) if isinstance(o, (str, Path)) else o for o in observations]
        return calibrate_observations(deployment(profile), obs, names)
    except (CalibrationError, ObserveUsageError) as err:
        raise InputError(str(err)) from None
