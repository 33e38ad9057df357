"""``spectune fleet FLEET.yaml`` and ``spectune recommend PROFILE --prometheus URL``: observe
every deployment through Prometheus, recommend gamma for each at its own acceptance and
batch mix, and compare with the gamma its serving config sets. Parsing and rendering only;
the arithmetic is in :mod:`spectune.fleet`.

The fleet file is read by :mod:`spectune.documents.fleet_file` (its format is documented there).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from spectune.cli.observe import DURATION, prometheus_options
from spectune.cli.params import FiniteFloatRange
from spectune.errors import InputError
from spectune.limits import (
    DEFAULT_TOKEN_ENV,
    MAX_TIMEOUT_SECONDS,
    MAX_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
    MIN_TIMEOUT_SECONDS,
)


def _row(obs: Any, profile: str, config: str | None, keep: dict[str, Any]) -> Any:
    """Recommendation for one observed group against ``profile`` (and its serving config)."""
    from dataclasses import replace

    from spectune.core.recommend import recommend
    from spectune.documents.profiles import load_deployment
    from spectune.engines.serving_config import read_serving_config
    from spectune.fleet import fleet_row
    from spectune.observe.apply import apply_observation

    dep = load_deployment(profile)
    applied = apply_observation(dep, obs)
    dep = applied.deployment
    if keep.get("gamma_max"):
        dep = replace(dep, gamma_max=keep["gamma_max"])
    rec = recommend(dep)
    current = None
    notes = list(applied.notes)
    if config:
        conf = read_serving_config(config)
        current = conf.gamma_at
        notes += conf.warnings
    return fleet_row(obs.labels, rec, applied.batch_mix, current, config, [*notes, *rec.notes])


def _render(rows: Sequence[Any], fleet: Any, notes: list[str], fmt: str) -> None:
    from spectune.documents.results import recommendation_doc
    from spectune.fleet import fleet_report_doc
    from spectune.render.formats import render

    q = fleet.query
    source = {"prometheus": fleet.source, "selector": f"{{{q.matchers}}}" if q.matchers else None,
              "by": list(q.by), "window_seconds": q.window,
              "end": fleet.to_dict()["window"]["end"]}
    from spectune.notes import notes as write_notes

    write_notes(notes)
    doc = fleet_report_doc(rows, source, [*fleet.notes, *notes], recommendation_doc)
    click.echo(render(doc, fmt), nl=False)


def _observe(prometheus: str | None, opts: dict[str, Any]) -> Any:
    from spectune.cli.observe import observe_fleet

    if not prometheus:
        raise InputError("give --prometheus URL (or `prometheus:` in the fleet file)")
    return observe_fleet(prometheus, **opts)


def recommend_prometheus(profile: str, prometheus: str, match: Sequence[str], fmt: str,
                         emit_kind: str | None, gamma_max: int | None, opts: dict[str, Any]) -> None:
    """``recommend PROFILE --prometheus URL [--match LABEL=VALUE]``: one gamma table per group."""
    from spectune.errors import ObserveUsageError
    from spectune.observe.prometheus import describe_labels, select_groups

    fleet = _observe(prometheus, opts)
    groups = select_groups(fleet, match) if match else list(fleet.observations)
    models = sorted({o.model_name or "" for o in groups})
    if len(models) > 1 and not opts.get("by") and not match:
        have = "; ".join(describe_labels(o.labels) for o in groups)
        raise ObserveUsageError(
            f"the selector matches {len(models)} models ({', '.join(models)}) and one PROFILE describes "
            f"one: choose with --match model_name=NAME (groups: {have}), group with --by LABEL, or map "
            "each to its profile with `spectune fleet FLEET.yaml`")
    rows = [_row(o, profile, None, {"gamma_max": gamma_max}) for o in groups]
    if emit_kind:
        if len(rows) != 1:
            raise ObserveUsageError(f"--emit needs one group, the selector gives {len(rows)}: narrow it "
                                    "with --match LABEL=VALUE")
        from spectune.engines.emit import emit_snippet

        click.echo(emit_snippet(rows[0].rec, emit_kind, rows[0].mix), nl=False)
        return
    _render(rows, fleet, [], fmt)


@click.command("fleet", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("fleet_file", metavar="FLEET.yaml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "yaml", "json", "markdown"]), help="Output format.")
@click.option("--window", type=DURATION, help="Window to observe (overrides the file's; default 1h).")
@click.option("--interval", type=FiniteFloatRange(MIN_INTERVAL_SECONDS, MAX_WINDOW_SECONDS), default=60.0,
              show_default=True,
              help="Seconds between samples of the running requests.")
@click.option("--timeout", type=FiniteFloatRange(MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS), default=30.0,
              show_default=True,
              help="Seconds allowed for each query's answer.")
@click.option("--token-env", default=DEFAULT_TOKEN_ENV, show_default=True, metavar="NAME",
              help="Environment variable holding a bearer token for Prometheus (never printed).")
@click.option("--token-file", type=click.Path(dir_okay=False), help="File holding the bearer token.")
@click.option("--ca-bundle", type=click.Path(dir_okay=False), help="CA bundle (PEM) for TLS.")
@click.option("--insecure", is_flag=True, help="Do not verify the TLS certificate.")
@prometheus_options
def fleet_command(fleet_file: str, fmt: str, window: float | None, interval: float, timeout: float,
                  token_env: str, token_file: str | None, ca_bundle: str | None, insecure: bool,
                  prometheus: str | None, selector: str | None, by: tuple[str, ...], at: str | None,
                  org_id: str | None) -> None:
    """Recommend gamma for every deployment of FLEET.yaml from the Prometheus that scrapes them:
    per deployment its observed acceptance and batch mix, the gamma its serving config sets,
    the recommended gamma and the predicted gain; then each deployment's gamma table.

    \b
    Example:
      spectune fleet FLEET.yaml --window 1h
    """
    from spectune.documents.fleet_file import load_fleet_file
    from spectune.observe.prometheus import describe_labels, select_groups

    ff = load_fleet_file(fleet_file)
    fleet = _observe(prometheus or ff.prometheus, dict(
        window=window or ff.window, interval=interval, selector=selector or ff.selector,
        by=(*ff.by, *by), at=at, timeout=timeout, token_env=token_env, token_file=token_file,
        ca_bundle=ca_bundle, insecure=insecure, org_id=org_id))
    rows, notes, used = [], [], set()
    for e in ff.entries:
        match = [f"{k}={v}" for k, v in e.match.items()]
        found = select_groups(fleet, match, required=False)
        if not found:
            notes.append(f"{fleet_file}: no group matches {', '.join(match)} in the window")
        for obs in found:
            used.add(id(obs))
            rows.append(_row(obs, e.profile, e.config, {}))
    for obs in fleet.observations:
        if id(obs) not in used:
            notes.append(f"group {describe_labels(obs.labels)} is in no deployments entry of {fleet_file}")
    _render(rows, fleet, notes, fmt)
    sys.stdout.flush()
