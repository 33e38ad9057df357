"""The public API, part two: the tuning itself -- gamma* per operating point with what goes
beside it (the batch mix, the ragged simulation, the SLO goodput), its document and the
serving-engine settings (``spectune recommend``, ``emit``, ``report``). Import it as
:mod:`spectune.api`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.api.profiles import deployment, load_observation
from spectune.api.profiles import observation as observation_of
from spectune.base.limits import DEFAULT_ADAPTIVE_CONFIG
from spectune.documents.envelope import Document

if TYPE_CHECKING:
    from spectune.core.deployment import Deployment
    from spectune.core.ragged import RaggedGrid
    from spectune.core.recommend import Recommendation
    from spectune.core.slo import Goodput
    from spectune.documents.observation import Observation
    from spectune.engines.emit import Snippet

# The file SGLang's --speculative-adaptive-config points at (spectune.engines.sglang's default).
DEFAULT_ADAPTIVE_PATH = DEFAULT_ADAPTIVE_CONFIG


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
    from spectune.api.overrides import prepare
    from spectune.core.lengths import with_lengths
    from spectune.core.recommend import recommend as run

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
    dep = rec.deployment
    # the note's module only where it can apply (start-up: most drafters never need it)
    if dep.drafter.kind in dep.engine.overlap_without and (rec.gamma_star > 0).any():
        from spectune.engines.engine_version import overlap_note

        lost = overlap_note(dep.engine, dep.drafter.kind, dep.gpu.key)
        rec = replace(rec, notes=(*rec.notes, lost)) if lost else rec
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
    from spectune.base.errors import InputError
    from spectune.base.limits import MAX_TPOT_SECONDS
    from spectune.core.recommend import Recommendation

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
        from spectune.documents.durations import tpot_seconds

        slo = tpot_seconds(tpot_slo)  # a bare number is milliseconds, as in the profile's slo.tpot_ms
    elif tpot_slo is not None:
        if not 0 < tpot_slo <= MAX_TPOT_SECONDS:
            raise InputError(f"tpot_slo {tpot_slo!r}: expected seconds > 0 and at most {MAX_TPOT_SECONDS:g}")
        slo = float(tpot_slo)
    if slo is not None:
        from spectune.core.slo import goodput

        good = goodput(dep, slo)
    return Extras(grid, good, tuple(found))


def report(profile: Deployment | str | Path, *, observation: Observation | str | Path | None = None,
           match: Sequence[str] = (), alpha: float | None = None, batch_sizes: Sequence[int] = (),
           context_lengths: Sequence[int] = (), gamma_max: int | None = None,
           calibration: str | Path | None = None, prompt_tokens: float | None = None,
           output_tokens: float | None = None) -> tuple[Tuning, list[tuple[str, str]]]:
    """What ``spectune report`` draws: the :func:`tune` of ``profile`` (the options as
    :func:`recommend` takes them) and the source of every built-in the deployment uses (name,
    where). The page itself is :func:`spectune.render.report.report_html`."""
    from spectune.documents.profiles import builtin_sources

    tuned = tune(profile, observation=observation, match=match, alpha=alpha, batch_sizes=batch_sizes,
                 context_lengths=context_lengths, gamma_max=gamma_max, calibration=calibration,
                 prompt_tokens=prompt_tokens, output_tokens=output_tokens)
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


def emit_kinds() -> dict[str, str]:
    """What ``emit`` writes, every engine's: snippet kind -> what it is (``vllm`` -> JSON for
    ``--speculative-config``), engine by engine."""
    from spectune.engines.emit import emit_kinds as kinds

    return kinds()


def emit(rec: Recommendation | Tuning, kind: str, *, observation: Observation | str | Path | None = None,
         batch_mix: Mapping[int, float] | None = None,
         adaptive_path: str = DEFAULT_ADAPTIVE_PATH) -> Snippet:
    """The serving-engine settings for ``rec`` (``spectune emit``): ``kind`` one of
    :func:`emit_kinds` (``vllm``, ``vllm-yaml``, ``sglang``, ...).

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
