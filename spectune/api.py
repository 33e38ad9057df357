"""The public API: what a notebook or a deploy tool calls (``import spectune``).

Every function returns a typed result and prints nothing; notes a user should see are in
the result (``.notes``). ``spectune.document(result)`` gives the versioned document
(``apiVersion: spectune/v1``) the command line prints with ``-o yaml|json``; to draw it as
a table use ``spectune.render.formats.render(doc, "table")``. Errors are
:class:`~spectune.errors.SpectuneError` subclasses (bad input: :class:`InputError`;
``observe`` faults: :class:`~spectune.errors.ObserveError`), each with the
``exit_code`` the command line would return.

Example::

    import spectune
    dep = spectune.load_profile("llama-3.1-70b-h100-eagle3")   # a file, or a shipped example
    rec = spectune.recommend(dep, batch_sizes=[1, 64], alpha=0.7)
    rec.gamma_star                                            # (batch, context) array of gamma*
    print(spectune.emit(rec, "vllm").text)                    # JSON for --speculative-config
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.documents.envelope import Document
from spectune.limits import DEFAULT_ADAPTIVE_CONFIG

if TYPE_CHECKING:
    from spectune.core.deployment import Deployment, Engine
    from spectune.core.hardware import GPU
    from spectune.core.model import Drafter, Model
    from spectune.core.recommend import Recommendation
    from spectune.core.speedup import PointSpeedup
    from spectune.documents.observation import Observation
    from spectune.engines.emit import Snippet
    from spectune.gate import CheckResult
    from spectune.pricing import PassCost

DEFAULT_ADAPTIVE_PATH = DEFAULT_ADAPTIVE_CONFIG


def load_profile(profile: str | Path) -> Deployment:
    """A deployment profile: a YAML file, ``"-"`` (stdin) or a shipped example's name.

    :class:`~spectune.errors.InputError` names file, line and key of a bad profile."""
    from spectune.documents.profiles import load_deployment

    return load_deployment(str(profile))


def _deployment(profile: Deployment | str | Path) -> Deployment:
    return load_profile(profile) if isinstance(profile, (str, Path)) else profile


def _observation(observation: Observation | str | Path | None) -> Observation | None:
    return load_observation(observation) if isinstance(observation, (str, Path)) else observation


def recommend(profile: Deployment | str | Path, *, observation: Observation | str | Path | None = None,
              alpha: float | None = None, batch_sizes: Sequence[int] = (),
              context_lengths: Sequence[int] = (), gamma_max: int | None = None,
              calibration: str | Path | None = None, prompt_tokens: float | None = None,
              output_tokens: float | None = None) -> Recommendation:
    """gamma* and its predicted speedup at every (batch size, context length) of ``profile``.

    ``observation`` (an :class:`Observation` or an ``observe -o yaml`` file) replaces the
    acceptance and operating points with measured ones; ``alpha`` (i.i.d. acceptance),
    ``batch_sizes``, ``context_lengths`` and ``gamma_max`` override the profile, as the
    same options of ``spectune recommend`` do; ``calibration`` (a ``calibrate -o yaml``
    file) replaces the engine constants with the fitted ones; ``prompt_tokens`` and
    ``output_tokens`` (mean tokens per request, together) price an aggregated worker's
    prefill (``--prompt-tokens`` / ``--output-tokens``). The notes (observation,
    extrapolation, lengths) are in ``.notes``."""
    from spectune.core.lengths import with_lengths
    from spectune.core.recommend import recommend as run
    from spectune.overrides import prepare

    dep = _deployment(profile)
    if calibration is not None:
        from spectune.documents.calibration import apply_calibration, load_calibration

        dep = apply_calibration(dep, load_calibration(calibration))
    prepared = prepare(dep, observation=_observation(observation), alpha=alpha,
                       batch_sizes=batch_sizes, context_lengths=context_lengths, gamma_max=gamma_max)
    rec = run(with_lengths(prepared.deployment, prompt_tokens, output_tokens,
                           contexts_given=bool(context_lengths)))
    return replace(rec, notes=prepared.notes + rec.notes) if prepared.notes else rec


def cost(profile: Deployment | str | Path | None = None, *, gpu: GPU | str | None = None,
         model: Model | str | None = None, batch: int = 1, tokens: int = 1, context: int = 0,
         tp: int | None = None, ep: int | None = None, dp: int | None = None,
         engine: Engine | str | None = None, achieved: bool = True,
         coactivation: float | None = None, prompt_tokens: float | None = None,
         output_tokens: float | None = None) -> PassCost:
    """One forward pass of ``batch`` sequences x ``tokens`` new tokens at ``context`` tokens
    of KV cache, per GPU, by component, with the marginal cost r of each (``spectune cost``).

    GPU, model, parallelism and engine come from ``profile`` and/or are given (names of
    built-ins or objects); ``engine="none"`` is the pure roofline, ``achieved=False`` peak rates.
    ``prompt_tokens`` / ``output_tokens`` (or an aggregated profile's lengths): the pass is the
    mean step with a ``prefill`` component."""
    from spectune.pricing import pass_lengths, price_pass, resolve_target

    target = resolve_target(_deployment(profile) if profile is not None else None, gpu=gpu, model=model,
                            tp=tp, ep=ep, dp=dp, engine=engine, coactivation=coactivation)
    return price_pass(target, batch, tokens, context, achieved=achieved,
                      lengths=pass_lengths(target, prompt_tokens, output_tokens))


def speedup(profile: Deployment | str | Path | None = None, *, gamma: int, batch: int, context: int,
            gpu: GPU | str | None = None, model: Model | str | None = None,
            drafter: Drafter | str | None = None, draft_cost: float | None = None,
            alpha: float | None = None, engine: Engine | str | None = None,
            prompt_tokens: float | None = None, output_tokens: float | None = None) -> PointSpeedup:
    """The roofline speedup of draft length ``gamma`` at one (batch, context) point
    (``spectune speedup``): expected tokens, plain, verify and draft step seconds, speedup;
    with ``prompt_tokens`` / ``output_tokens`` the aggregated, diluted speedup."""
    from spectune.core.lengths import with_lengths
    from spectune.core.speedup import point_speedup
    from spectune.pricing import resolve_target, speedup_deployment

    target = resolve_target(_deployment(profile) if profile is not None else None, gpu=gpu, model=model,
                            engine=engine)
    dep = speedup_deployment(target, batch, context, drafter=drafter, draft_cost=draft_cost, alpha=alpha)
    return point_speedup(with_lengths(dep, prompt_tokens, output_tokens, contexts_given=True),
                         batch, context, gamma)


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

    dep = _deployment(profile)
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
        return calibrate_observations(_deployment(profile), obs, names)
    except (CalibrationError, ObserveUsageError) as err:
        raise InputError(str(err)) from None


def observe_url(url: str, *, window: float = 60.0, **options: Any) -> Observation:
    """Measure acceptance and the operating point of the vLLM / SGLang server at ``url``
    over ``window`` seconds (``spectune observe URL``); ``options`` as
    :func:`spectune.observe.api.observe_url` takes them (``interval``, ``model_name``,
    ``token_file``, ``ca_bundle``, ``timeout``, ...). Blocks for the window."""
    from spectune.observe.api import observe_url as observe

    return observe(url, window=window, **options)


def observe_log(path: str | Path) -> Observation:
    """The same measurement from vLLM's ``SpecDecoding metrics`` log lines (``"-"``: stdin)."""
    from spectune.observe.log import observe_log as read_log

    return read_log(path)


def load_observation(path: str | Path) -> Observation:
    """An ``observe -o yaml|json`` file read back (validated; InputError-style faults)."""
    from spectune.documents.observation import load_observation as load

    return load(path)


def emit(rec: Recommendation, kind: str, *, observation: Observation | str | Path | None = None,
         batch_mix: Mapping[int, float] | None = None,
         adaptive_path: str = DEFAULT_ADAPTIVE_PATH) -> Snippet:
    """The serving-engine settings for ``rec`` (``spectune emit``): ``kind`` one of
    ``vllm``, ``vllm-yaml``, ``vllm-python``, ``sglang``, ``sglang-adaptive-config``.

    Where one static gamma must serve every batch size, it is chosen for the observed batch
    mix of ``observation`` and/or ``batch_mix`` (batch size -> weight; its entries win).
    Returns ``.text`` (the snippet) and ``.notes``."""
    from spectune.engines.emit import build_snippet

    mix: dict[int, float] = {}
    obs = _observation(observation)
    if obs is not None:
        from spectune.observe.apply import apply_observation

        mix.update(apply_observation(rec.deployment, obs).batch_mix or {})
    mix.update(batch_mix or {})
    return build_snippet(rec, kind, mix or None, adaptive_path=adaptive_path)


def check(serving_config: str | Path, profile: Deployment | str | Path,
          tolerance: float | None = None) -> CheckResult:
    """Gate a deployed serving configuration (``vllm serve --config`` file, command line,
    Kubernetes manifest) against ``profile``'s recommendation (``spectune check``):
    ``.exit_code`` 0 pass / 1 fail, ``.document`` the CheckReport, ``.warnings``."""
    from spectune.engines.serving_config import read_serving_config
    from spectune.gate import DEFAULT_TOLERANCE
    from spectune.gate import check as run

    conf = read_serving_config(str(serving_config))
    return run(conf, _deployment(profile), DEFAULT_TOLERANCE if tolerance is None else tolerance)


def list_profiles(kind: str | None = None) -> Document:
    """Built-in GPUs, models, drafters, engines and shipped examples (kind ``ProfileList``);
    ``kind`` one of those five to list only it."""
    import yaml

    from spectune.documents.profile_list import LISTED, PROFILE_LIST
    from spectune.documents.profiles import examples_dir, profiles_dir

    rows = []
    for k in [kind] if kind else LISTED:
        folder = examples_dir() if k == "examples" else profiles_dir() / k
        for f in sorted(folder.glob("*.yaml")):
            head = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            desc = head.get("name") or head.get("description") or ""
            rows.append({"kind": k, "name": f.stem, "description": str(desc)})
    return PROFILE_LIST.dump({"profiles": rows})


def document(result: Any) -> Document:
    """The versioned document of a result of this API (what ``-o yaml|json`` prints):
    a Recommendation, PassCost, Observation, CheckResult, or a document (returned as is)."""
    from spectune.core.recommend import Recommendation

    if isinstance(result, dict) and "apiVersion" in result:
        return result
    if isinstance(result, Recommendation):
        from spectune.documents.results import recommendation_doc

        return recommendation_doc(result)
    to_dict = getattr(result, "to_dict", None)  # PassCost, Observation
    if callable(to_dict):
        doc: Document = to_dict()
        return doc
    report = getattr(result, "document", None)  # CheckResult
    if isinstance(report, dict):
        return report
    raise TypeError(f"no document for a {type(result).__name__}")


def rules(profile: Deployment | str | Path, *, by: Sequence[str] = (), selector: str | None = None,
          tolerance: float | None = None, context: int | None = None, window: float = 600.0,
          hold: float = 900.0, prometheus: str | None = None, command: str = "spectune rules",
          grafana: bool = False) -> str:
    """A Prometheus rules file (``spectune rules``): recording rules for the speculative
    metrics of every deployment (``model_name`` plus the ``by`` labels, series matching
    ``selector``) over ``window`` seconds, and alerts (``for:`` ``hold`` seconds) whose
    thresholds the cost model computes for ``profile`` at ``context`` tokens (default: its
    first context length) and ``tolerance`` (default: ``check``'s). ``profile`` may be a
    fleet file (``deployments:``): each entry's alerts then cover the groups it matches,
    its ``selector``, ``by`` and ``prometheus`` are used (``selector`` replaces, ``by`` adds).
    ``grafana``: a Grafana dashboard (JSON) of the recorded series instead, with the
    recommended gamma and the break-even acceptance as reference lines."""
    from spectune.core.thresholds import thresholds
    from spectune.documents.fleet_file import load_fleet_file
    from spectune.errors import InputError
    from spectune.limits import DEFAULT_CHECK_TOLERANCE
    from spectune.observe.prometheus import group_labels, selector_matchers
    from spectune.render.rules import RulesSpec, Target, check_matchers, rules_file

    tol = DEFAULT_CHECK_TOLERANCE if tolerance is None else tolerance
    if not 0.0 <= tol < 1.0:
        raise InputError(f"tolerance {tol:g}: expected a fraction in [0, 1)")
    fleet = load_fleet_file(str(profile)) if _is_fleet(profile) else None
    if fleet is not None:
        selector = selector or fleet.selector
        by = (*fleet.by, *by)
        prometheus = prometheus or fleet.prometheus
    sel = selector or ""
    spec = RulesSpec(group_labels(by), check_matchers(sel, selector_matchers(sel)), window, hold,
                     prometheus, command)
    if fleet is None:
        dep = _deployment(profile)
        ref = "PROFILE" if str(profile) == "-" or not isinstance(profile, (str, Path)) else str(profile)
        targets = [Target({}, thresholds(dep, tolerance=tol, context=context), ref)]
    else:
        targets = []
        for i, e in enumerate(fleet.entries):
            for k in e.match:
                if k not in spec.by:
                    raise InputError(f"label {k!r} is not a grouping label (model_name and by: "
                                     f"{', '.join(spec.by)}); add it to `by`", str(profile), e.line,
                                     f"deployments[{i}].match")
            try:
                dep = load_profile(e.profile)
            except InputError as err:
                raise InputError(err.message, str(profile), e.line, f"deployments[{i}].profile") from None
            targets.append(Target(e.match, thresholds(dep, tolerance=tol, context=context), e.profile,
                                  e.config))
    if grafana:
        from spectune.render.grafana import dashboard

        return dashboard(targets, spec)
    return rules_file(targets, spec)


def _is_fleet(ref: Deployment | str | Path) -> bool:
    """Whether ``ref`` is a fleet file (a YAML mapping with ``deployments``), not a profile."""
    from spectune.documents.inputs import is_file

    if not isinstance(ref, (str, Path)) or str(ref) == "-" or not is_file(ref):
        return False
    from spectune.documents.profiles import parse_yaml, read_text

    data = parse_yaml(read_text(ref), str(ref)).data
    return isinstance(data, dict) and "deployments" in data
