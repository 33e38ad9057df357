"""``spectune fleet FLEET.yaml``: observe every deployment through Prometheus, recommend gamma
for each at its own acceptance and batch mix, and compare with the gamma its serving config
sets. Parsing and rendering only: :func:`spectune.api.fleet` does the rest (the arithmetic
is in :mod:`spectune.api.fleet_gap`, the fleet file's format in :mod:`spectune.documents.fleet_file`).
"""

from __future__ import annotations

import sys

import click

from spectune.base.limits import (
    DEFAULT_TOKEN_ENV,
    MAX_TIMEOUT_SECONDS,
    MAX_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
    MIN_TIMEOUT_SECONDS,
)
from spectune.base.notes import notes
from spectune.cli.options import FORMATS, echo_doc, prometheus_options
from spectune.cli.params import DURATION, FiniteFloatRange


@click.command("fleet", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("fleet_file", metavar="FLEET.yaml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "fmt", default="table", show_default=True,
              type=click.Choice(FORMATS), help="Output format.")
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
    import spectune.api as api

    result = api.fleet(fleet_file, prometheus=prometheus, window=window, selector=selector, by=by,
                       interval=interval, at=at, timeout=timeout, token_env=token_env, token_file=token_file,
                       ca_bundle=ca_bundle, insecure=insecure, org_id=org_id)
    notes(result.notes)
    echo_doc(result.document, fmt)
    sys.stdout.flush()
