"""The public API, part three: what a running server or the Prometheus that scrapes it says,
and what spectune makes of it -- one server observed, every group of a fleet observed and
recommended for, engine constants fitted to observed windows, the CI gate over one
configuration or a directory of manifests, the Prometheus rules (``spectune observe``,
``fleet``, ``recommend --prometheus``, ``calibrate``, ``check``, ``rules``). Import it as
:mod:`spectune.api`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.api.profiles import deployment, load_observation, load_profile
from spectune.base.limits import DEFAULT_TOKEN_ENV

if TYPE_CHECKING:
    from spectune.api.fleet_gap import FleetResult
    from spectune.api.gate import CheckResult
    from spectune.core.deployment import Deployment
    from spectune.documents.envelope import Document
    from spectune.documents.observation import Observation
    from spectune.observe.prometheus import Fleet

# Where a bearer token is looked for by default.
TOKEN_ENV = DEFAULT_TOKEN_ENV


def window_seconds(text: str) -> float:
    """Seconds of a window from ``90``, ``20s``, ``5m``, ``1h`` (Prometheus' duration units);
    :class:`~spectune.base.errors.ObserveUsageError` for anything else."""
    from spectune.documents.durations import window_seconds as seconds

    return seconds(text)


def speculative_config(text: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The server's ``--speculative-config`` (JSON text or a mapping) as a mapping, or None;
    anything but a JSON object is an :class:`~spectune.base.errors.ObserveUsageError` (exit 2)."""
    if text is None:
        return None
    from spectune.base.errors import ObserveUsageError

    if isinstance(text, Mapping):
        return dict(text)
    from spectune.documents.inputs import JsonProblem, parse_json

    try:
        cfg = parse_json(text)
    except JsonProblem as err:
        raise ObserveUsageError(f"speculative_config: not JSON spectune reads ({err.message})") from None
    if not isinstance(cfg, dict):
        raise ObserveUsageError("speculative_config: expected a JSON object, e.g. "
                                '\'{"method": "ngram", "num_speculative_tokens": 3}\'')
    return cfg


def observe_url(url: str, *, window: float = 60.0,
                speculative_config: str | Mapping[str, Any] | None = None, **options: Any) -> Observation:
    """Measure acceptance and the operating point of the vLLM / SGLang server at ``url``
    over ``window`` seconds (``spectune observe URL``); ``options`` as
    :func:`spectune.observe.api.observe_url` takes them (``interval``, ``model_name``,
    ``timeout``, ``retries``, ``token_env``, ``token_file``, ``ca_bundle``, ``insecure``,
    ``num_speculative_tokens``, ``save_scrapes``, ``progress``). ``speculative_config``: the
    server's own (the metrics do not show it), recorded in the observation. Blocks for the
    window."""
    from spectune.observe.api import observe_url as observe

    settings = _speculative_config(speculative_config)  # bad input before the window, not after
    obs = observe(url, window=window, **options)
    return obs if settings is None else replace(obs, speculative_config=settings)


def _speculative_config(text: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    return speculative_config(text)


def observe_log(path: str | Path, *,
                speculative_config: str | Mapping[str, Any] | None = None) -> Observation:
    """The same measurement from vLLM's ``SpecDecoding metrics`` log lines (``"-"``: stdin)."""
    from spectune.observe.log import observe_log as read_log

    settings = _speculative_config(speculative_config)
    obs = read_log(path)
    return obs if settings is None else replace(obs, speculative_config=settings)


def observe_prometheus(url: str, *, window: float | None = None, interval: float = 60.0,
                       selector: str | None = None, by: Iterable[str] = (), at: str | float | None = None,
                       timeout: float = 30.0, token_env: str | None = TOKEN_ENV,
                       token_file: str | None = None,
                       ca_bundle: str | None = None, insecure: bool = False, org_id: str | None = None,
                       num_speculative_tokens: int | None = None) -> Fleet:
    """Every group of servers the Prometheus at ``url`` scrapes (``model_name`` plus the
    ``by`` labels, series matching ``selector``), observed over ``window`` seconds (default
    one hour) ending ``at`` (RFC 3339 or Unix seconds; default now) (``spectune observe
    --prometheus``). The bearer token comes from ``token_file`` or the variable
    ``token_env`` and is never printed; ``org_id`` is the X-Scope-OrgID tenant."""
    from spectune.observe.prometheus import observe_prometheus as observe
    from spectune.observe.prometheus import parse_time
    from spectune.observe.scrape import resolve_token

    end = at if isinstance(at, (int, float)) else parse_time(at)
    return observe(url, window=window or 3600.0, at=end, interval=interval, selector=selector, by=tuple(by),
                   timeout=timeout, token=resolve_token(token_env, token_file), ca_bundle=ca_bundle,
                   insecure=insecure, org_id=org_id, num_speculative_tokens=num_speculative_tokens)


def recommend_prometheus(profile: str, prometheus: str, *, match: Sequence[str] = (),
                         gamma_max: int | None = None, **options: Any) -> FleetResult:
    """``spectune recommend PROFILE --prometheus URL``: each group Prometheus observes (those
    ``match``, LABEL=VALUE strings, selects) gets ``profile``'s recommendation at its own
    acceptance and batch mix. ``options`` as :func:`observe_prometheus` takes them."""
    from spectune.api.fleet_gap import profile_rows

    observed = observe_prometheus(prometheus, **options)
    return profile_rows(observed, profile, match, grouped=bool(options.get("by")), gamma_max=gamma_max)


def fleet(fleet_file: str | Path, *, prometheus: str | None = None, window: float | None = None,
          selector: str | None = None, by: Sequence[str] = (), **options: Any) -> FleetResult:
    """``spectune fleet FLEET.yaml``: every deployment of the fleet file observed through the
    Prometheus that scrapes them, recommended for at its own acceptance and batch mix, and
    compared with the gamma its serving config sets. ``prometheus``, ``window`` and
    ``selector`` replace the file's, ``by`` adds to it; ``options`` as
    :func:`observe_prometheus` takes them. ``.document`` is the FleetReport."""
    from spectune.api.fleet_gap import file_rows
    from spectune.base.errors import InputError
    from spectune.documents.fleet_file import load_fleet_file

    ff = load_fleet_file(str(fleet_file))
    url = prometheus or ff.prometheus
    if not url:
        raise InputError("give --prometheus URL (or `prometheus:` in the fleet file)")
    observed = observe_prometheus(url, window=window or ff.window, selector=selector or ff.selector,
                                  by=(*ff.by, *by), **options)
    return file_rows(observed, ff, str(fleet_file))


def check(serving_config: str | Path, profile: Deployment | str | Path, tolerance: float | None = None, *,
          calibration: str | Path | None = None, prompt_tokens: float | None = None,
          output_tokens: float | None = None) -> CheckResult:
    """Gate a deployed serving configuration (``vllm serve --config`` file, command line,
    Kubernetes manifest) against ``profile``'s recommendation (``spectune check``):
    ``.exit_code`` 0 pass / 1 fail, ``.document`` the CheckReport, ``.warnings``.
    ``calibration`` (a ``calibrate -o yaml`` file) and ``prompt_tokens`` / ``output_tokens``
    as :func:`spectune.api.recommend` takes them."""
    from spectune.api.gate import DEFAULT_TOLERANCE
    from spectune.api.gate import check as run
    from spectune.core.lengths import with_lengths
    from spectune.engines.serving_config import read_serving_config

    conf = read_serving_config(str(serving_config))
    dep = deployment(profile)
    if calibration is not None:
        from spectune.documents.calibration import apply_calibration, load_calibration

        dep = apply_calibration(dep, load_calibration(calibration))
    dep = with_lengths(dep, prompt_tokens, output_tokens)
    return run(conf, dep, DEFAULT_TOLERANCE if tolerance is None else tolerance)


def check_directory(folder: str | Path, profile_map: str | Path,
                    tolerance: float | None = None) -> tuple[Document, int, list[str]]:
    """``spectune check DIR --profiles MAP.yaml``: every manifest under ``folder`` checked
    against the profile ``profile_map`` names for it (:mod:`spectune.api.gitops`). Returns the
    ``CheckSet`` document, the exit code (1 when any manifest fails) and the warnings."""
    from spectune.api.gate import DEFAULT_TOLERANCE
    from spectune.api.gitops import check_directory as run

    warnings: list[str] = []
    doc, code = run(str(folder), str(profile_map), DEFAULT_TOLERANCE if tolerance is None else tolerance,
                    warnings.append)
    return doc, code, warnings


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
    from spectune.base.errors import InputError
    from spectune.base.limits import DEFAULT_CHECK_TOLERANCE
    from spectune.core.thresholds import thresholds
    from spectune.documents.fleet_file import load_fleet_file
    from spectune.observe.prometheus import group_labels, selector_matchers
    from spectune.render.rules import RulesSpec, Target, check_matchers, rules_file

    tol = DEFAULT_CHECK_TOLERANCE if tolerance is None else tolerance
    if not 0.0 <= tol < 1.0:
        raise InputError(f"tolerance {tol:g}: expected a fraction in [0, 1)")
    ff = load_fleet_file(str(profile)) if _is_fleet(profile) else None
    if ff is not None:
        selector = selector or ff.selector
        by = (*ff.by, *by)
        prometheus = prometheus or ff.prometheus
    sel = selector or ""
    spec = RulesSpec(group_labels(by), check_matchers(sel, selector_matchers(sel)), window, hold,
                     prometheus, command)
    if ff is None:
        dep = deployment(profile)
        ref = "PROFILE" if str(profile) == "-" or not isinstance(profile, (str, Path)) else str(profile)
        targets = [Target({}, thresholds(dep, tolerance=tol, context=context), ref)]
    else:
        targets = []
        for i, e in enumerate(ff.entries):
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


def calibrate(profile: Deployment | str | Path,
              observations: Sequence[Observation | str | Path]) -> Document:
    """Fit ``profile``'s engine constants to the step times of observed windows of its own
    server (``spectune calibrate``): ``observe -o yaml`` files or Observations, speculation
    off and on, at one or more concurrencies. Returns the Calibration document (its
    ``notes`` say what the windows could not separate); pass its file to
    ``recommend(..., calibration=FILE)``. Too few or unusable windows: InputError."""
    from spectune.base.errors import InputError, ObserveUsageError
    from spectune.core.calibrate import CalibrationError
    from spectune.documents.calibration import calibrate_observations

    names = [str(o) if isinstance(o, (str, Path)) else f"observation[{i}]"
             for i, o in enumerate(observations)]
    try:
        obs = [load_observation(o) if isinstance(o, (str, Path)) else o for o in observations]
        return calibrate_observations(deployment(profile), obs, names)
    except (CalibrationError, ObserveUsageError) as err:
        raise InputError(str(err)) from None
