"""``spectune recommend``: gamma* per batch size and context length, from the profile, an
observation, a server's /metrics or the Prometheus that scrapes a fleet."""

from __future__ import annotations

from typing import Any

import click

from spectune.base.errors import InputError
from spectune.base.limits import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WINDOW_SECONDS,
    MAX_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
)
from spectune.base.notes import notes
from spectune.cli.options import (
    calibration_option,
    complete_profile,
    echo_doc,
    output_option,
    prometheus_options,
    table_variant,
    what_if_options,
)
from spectune.cli.params import DURATION, FiniteFloatRange, LazyChoice, emit_kinds


@click.command()
@click.argument("profile", shell_complete=complete_profile)
@output_option()
@what_if_options
@click.option("--detail", is_flag=True,
              help="One row per operating point with time per output token, tokens/s and the "
                   "limiting component (table and markdown output).")
@click.option("--metrics-url", help="Observe this server's /metrics first (see `observe`).")
@click.option("--window", type=DURATION, default=None,
              help="With --metrics-url: seconds to observe [default: 60]; with --prometheus: 20s, 5m, "
                   "1h... [default: 1h].")
@click.option("--interval", type=FiniteFloatRange(MIN_INTERVAL_SECONDS, MAX_WINDOW_SECONDS),
              default=DEFAULT_INTERVAL_SECONDS, show_default=True,
              help="With --metrics-url: seconds between samples of the running requests.")
@click.option("--model-name", help="With --metrics-url: the served model to read, when there are several.")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help=f"With --metrics-url: bearer token file (default: ${DEFAULT_TOKEN_ENV}). Never printed.")
@click.option("--ca-bundle", type=click.Path(dir_okay=False), help="With --metrics-url: CA bundle for TLS.")
@click.option("--emit", "emit_kind", type=LazyChoice(emit_kinds),
              help="Print only the serving-engine snippet for the recommendation.")
@click.option("--ragged", is_flag=True,
              help="Add the ragged-depth simulation: best single gamma, confidence-gated "
                   "gamma, per-sequence depths and the perfectly calibrated oracle per point.")
@click.option("--rounds", "rounds_file", type=click.Path(dir_okay=False),
              help="With --ragged: recorded draft rounds (JSON Lines of {confidences, committed}) "
                   "instead of the two-population fit to the acceptance.")
@click.option("--tpot-slo", "tpot_slo",
              help="Time-per-output-token target (e.g. 25ms; a bare number is milliseconds): the best "
                   "(batch, gamma) per context that meets it, and the best without speculation (or the "
                   "profile's slo.tpot_ms).")
@prometheus_options
@click.option("--match", multiple=True, metavar="LABEL=VALUE",
              help="With --prometheus, or --observed FILE of `observe --prometheus`: only the groups "
                   "with these labels (repeatable).")
@calibration_option
def recommend(profile: str, fmt: str, batches: tuple[int, ...], contexts: tuple[int, ...],
              gamma_max: int | None, alpha: float | None, observed: str | None,
              prompt_tokens: float | None, output_tokens: float | None, detail: bool,
              metrics_url: str | None, window: float | None, interval: float, model_name: str | None,
              token_file: str | None,
              ca_bundle: str | None, emit_kind: str | None, ragged: bool,
              rounds_file: str | None, tpot_slo: str | None, prometheus: str | None, selector: str | None,
              by: tuple[str, ...], at: str | None, org_id: str | None, match: tuple[str, ...],
              calibration: str | None) -> None:
    """Recommend gamma* per batch size and context length for PROFILE.

    PROFILE is a deployment YAML file, '-' for stdin, or the name of a shipped example
    (spectune profiles list examples). With --prometheus, every group of servers Prometheus
    scrapes (model_name and the --by labels, narrowed by --match) gets its own gamma table at
    its observed acceptance and batch mix, with a summary across groups.

    \b
    Examples:
      spectune recommend llama-3.1-70b-h100-eagle3
      spectune recommend qwen3-30b-a3b-h100-eagle3 --detail
      spectune recommend llama-3.1-70b-h100-eagle3 --alpha 0.6 --batch 1 --batch 64
    """
    import spectune.api as api

    if prometheus:
        if (observed or metrics_url or alpha is not None or batches or contexts or prompt_tokens
                or output_tokens):
            raise InputError("--prometheus takes acceptance and operating points from Prometheus: "
                             "not with --observed, --metrics-url, --alpha, --batch, --context, "
                             "--prompt-tokens or --output-tokens")
        _by_prometheus(profile, prometheus, match, fmt, emit_kind, gamma_max, dict(
            window=window, interval=interval, selector=selector, by=by, at=at, timeout=30.0,
            token_file=token_file, ca_bundle=ca_bundle, org_id=org_id))
        return
    if observed and metrics_url:
        raise InputError("give --observed FILE or --metrics-url URL, not both")
    observation: Any = observed
    if metrics_url:
        observation = api.observe_url(metrics_url, window=window or DEFAULT_WINDOW_SECONDS, interval=interval,
                                      model_name=model_name, token_file=token_file, ca_bundle=ca_bundle)
    tuned = api.tune(profile, observation=observation, match=match, alpha=alpha, batch_sizes=batches,
                     context_lengths=contexts, gamma_max=gamma_max, calibration=calibration,
                     prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    rec = tuned.recommendation
    if emit_kind:
        notes(rec.notes)
        snip = api.emit(tuned, emit_kind)
        notes(snip.notes)
        click.echo(snip.text, nl=False)
        return
    more = api.extras(rec, ragged=ragged, rounds=rounds_file, tpot_slo=tpot_slo)  # bad input first
    notes(more.notes)
    notes(rec.notes)
    doc = api.document(rec, more)
    echo_doc(doc, fmt, variant=table_variant(detail, fmt, len(doc["context_lengths"])))


def _by_prometheus(profile: str, prometheus: str, match: tuple[str, ...], fmt: str, emit_kind: str | None,
                   gamma_max: int | None, opts: dict[str, object]) -> None:
    """``recommend PROFILE --prometheus URL [--match LABEL=VALUE]``: one gamma table per group."""
    import spectune.api as api
    from spectune.base.errors import ObserveUsageError

    result = api.recommend_prometheus(profile, prometheus, match=match, gamma_max=gamma_max, **opts)
    if emit_kind:
        if len(result.rows) != 1:
            raise ObserveUsageError(f"--emit needs one group, the selector gives {len(result.rows)}: narrow "
                                    "it with --match LABEL=VALUE")
        row = result.rows[0]
        snip = api.emit(row.rec, emit_kind, batch_mix=row.mix)
        notes(snip.notes)
        click.echo(snip.text, nl=False)
        return
    notes(result.notes)
    echo_doc(result.document, fmt)
