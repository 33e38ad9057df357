"""``spectune observe``: parses options, calls :func:`spectune.api.observe_url`,
:func:`spectune.api.observe_log` or :func:`spectune.api.observe_prometheus`, renders. No
arithmetic here. Listed in the command table of ``spectune.cli.main``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from spectune.base.errors import EXIT_CODES
from spectune.base.limits import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WINDOW_SECONDS,
    MAX_RETRIES,
    MAX_TIMEOUT_SECONDS,
    MAX_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
    MIN_TIMEOUT_SECONDS,
)
from spectune.cli.options import FORMATS, prometheus_options
from spectune.cli.params import DURATION, FiniteFloatRange

_EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:>2}  {meaning}" for code, _, meaning in
                                          ((0, None, "success"), *EXIT_CODES))


@click.command(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("url", required=False)
@click.option("--log", "log_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Read vLLM 'SpecDecoding metrics' log lines from FILE ('-' = stdin) instead of a URL.")
@click.option("-o", "--output", "fmt", default="table", show_default=True,
              type=click.Choice(FORMATS),
              help="Output format; yaml/json load back with `recommend --observed FILE`.")
@click.option("--window", type=DURATION, default=None,
              help="How long to observe: seconds or 20s, 5m, 1h [default: 60 s; 1h with --prometheus].")
@click.option("--interval", type=FiniteFloatRange(MIN_INTERVAL_SECONDS, MAX_WINDOW_SECONDS),
              default=DEFAULT_INTERVAL_SECONDS, show_default=True,
              help="Seconds between intermediate samples (running requests, resets).")
@click.option("--model-name", help="Model to observe when the server serves several.")
@click.option("--timeout", type=FiniteFloatRange(MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS),
              default=DEFAULT_TIMEOUT_SECONDS, show_default=True,
              help="Seconds allowed for one complete answer.")
@click.option("--retries", type=click.IntRange(0, MAX_RETRIES), default=DEFAULT_RETRIES, show_default=True,
              help="Retries of a scrape on refused connections, timeouts and HTTP 5xx (with backoff).")
@click.option("--token-env", default=DEFAULT_TOKEN_ENV, show_default=True, metavar="NAME",
              help="Environment variable holding a bearer token (never printed).")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help="File holding a bearer token (overrides --token-env).")
@click.option("--ca-bundle", type=click.Path(dir_okay=False),
              help="CA bundle (PEM) to verify the server's TLS certificate.")
@click.option("--insecure", is_flag=True, help="Do not verify the TLS certificate.")
@click.option("--num-speculative-tokens", type=click.IntRange(1, 64),
              help="Draft length K, for SGLang servers that do not show it.")
@click.option("--speculative-config", "spec_config", metavar="JSON",
              help="The server's --speculative-config, recorded in the document (the metrics do "
                   "not show it), e.g. '{\"method\":\"ngram\",\"num_speculative_tokens\":3}'.")
@click.option("--save-scrapes", type=click.Path(file_okay=False),
              help="Write every raw scrape (and index.json with times) to this folder.")
@click.option("-q", "--quiet", is_flag=True, callback=lambda _c, _p, v: _quiet(v), is_eager=True,
              help="No notes on stderr and no progress bar (warnings and errors still show).")
@prometheus_options
def observe(url: str | None, log_file: str | None, fmt: str, window: float | None, interval: float,
            model_name: str | None, timeout: float, retries: int, token_env: str, token_file: str | None,
            ca_bundle: str | None, insecure: bool, num_speculative_tokens: int | None,
            spec_config: str | None, save_scrapes: str | None, quiet: bool, prometheus: str | None,
            selector: str | None, by: tuple[str, ...], at: str | None, org_id: str | None) -> None:
    """Measure speculative-decoding acceptance and the operating point of a running vLLM or
    SGLang server over a window, from its Prometheus /metrics at URL (host:port or a full
    URL), or from vLLM's log lines with --log.

    \b
    Examples:
      spectune observe localhost:8000 --window 60
      spectune observe https://llm.internal/metrics --token-file ~/.tok -o yaml > obs.yaml
      spectune recommend PROFILE --observed OBS.yaml
      journalctl -u vllm | spectune observe --log -
      spectune observe --prometheus http://prometheus:9090 --window 1h \\
          --selector '{namespace="prod"}' --by deployment -o yaml > fleet.yaml

    With --prometheus, the Prometheus that already scrapes the servers is asked (increase()
    and range queries over the window ending --at) and one observation is printed per group
    of series: model_name plus the --by labels.
    """
    import spectune.api as api
    from spectune.base.errors import ObserveUsageError
    from spectune.render.formats import render

    if sum(x is not None for x in (url, log_file, prometheus)) != 1:
        raise ObserveUsageError("give a metrics URL, --log FILE or --prometheus URL (one of them)")
    if prometheus is not None:
        fleet = api.observe_prometheus(prometheus, window=window, interval=interval, selector=selector, by=by,
                                       at=at, timeout=timeout, token_env=token_env, token_file=token_file,
                                       ca_bundle=ca_bundle, insecure=insecure, org_id=org_id,
                                       num_speculative_tokens=num_speculative_tokens)
        click.echo(render(fleet.to_dict(), fmt), nl=False)
        return
    if window is None:
        window = DEFAULT_WINDOW_SECONDS
    try:  # bad input before the window, not after
        settings = api.speculative_config(spec_config)
    except ObserveUsageError as err:
        message = err.message.replace("speculative_config:", "--speculative-config:", 1)
        raise ObserveUsageError(message) from None
    if log_file is not None:
        obs = api.observe_log(log_file, speculative_config=settings)
    else:
        with contextlib.ExitStack() as stack:
            progress: _Progress | None = None
            if not quiet and _stderr_is_terminal():
                ticks = max(1, int(window * 10))  # tenths of a second
                bar = stack.enter_context(click.progressbar(length=ticks, file=sys.stderr,
                                                            label=f"observing {window:g} s", show_eta=True))
                progress = _Progress(bar, ticks)
            obs = api.observe_url(url or "", window=window, interval=interval, model_name=model_name,
                                  timeout=timeout, retries=retries, token_env=token_env,
                                  token_file=token_file,
                                  ca_bundle=ca_bundle, insecure=insecure,
                                  num_speculative_tokens=num_speculative_tokens, save_scrapes=save_scrapes,
                                  progress=progress, speculative_config=settings)
    click.echo(render(obs.to_dict(), fmt), nl=False)


def _quiet(on: bool) -> bool:
    """``-q``: the notes silenced (:mod:`spectune.base.notes`, as every command's ``-q``)."""
    if on:
        from spectune.base.notes import set_quiet

        set_quiet(True)
    return on


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class _Progress:
    """``progress(elapsed_seconds)`` for :func:`~spectune.observe.observe_url`: moves a click
    progress bar of ``ticks`` tenths of a second forward, never back."""

    def __init__(self, bar: Any, ticks: int) -> None:
        self.bar, self.ticks, self.done = bar, ticks, 0

    def __call__(self, elapsed: float) -> None:
        pos = min(int(elapsed * 10), self.ticks)
        if pos > self.done:
            self.bar.update(pos - self.done)
            self.done = pos
