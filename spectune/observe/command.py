"""The ``spectune observe`` click command: parses options, calls :mod:`spectune.observe`,
renders. No arithmetic here. Registered on the main group by ``spectune.cli``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from spectune.observe.faults import EXIT_CODES

_EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:>2}  {meaning}" for code, _, meaning in
                                          ((0, None, "success"), *EXIT_CODES))


@click.command(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("url", required=False)
@click.option("--log", "log_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Read vLLM 'SpecDecoding metrics' log lines from FILE ('-' = stdin) instead of a URL.")
@click.option("-o", "--output", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "yaml", "json", "markdown"]),
              help="Output format; yaml/json load back with `recommend --observed FILE`.")
@click.option("--window", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds to observe.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="Seconds between intermediate samples (running requests, resets).")
@click.option("--model-name", help="Model to observe when the server serves several.")
@click.option("--timeout", type=click.FloatRange(min=0.01), default=10.0, show_default=True,
              help="Seconds allowed for one complete answer.")
@click.option("--retries", type=click.IntRange(0, 20), default=3, show_default=True,
              help="Retries of a scrape on refused connections, timeouts and HTTP 5xx (with backoff).")
@click.option("--token-env", default="SPECTUNE_METRICS_TOKEN", show_default=True, metavar="NAME",
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
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def observe(url: str | None, log_file: str | None, fmt: str, window: float, interval: float,
            model_name: str | None, timeout: float, retries: int, token_env: str, token_file: str | None,
            ca_bundle: str | None, insecure: bool, num_speculative_tokens: int | None,
            spec_config: str | None, save_scrapes: str | None, quiet: bool) -> None:
    """Measure speculative-decoding acceptance and the operating point of a running vLLM or
    SGLang server over a window, from its Prometheus /metrics at URL (host:port or a full
    URL), or from vLLM's log lines with --log.

    \b
    Examples:
      spectune observe localhost:8000 --window 60
      spectune observe https://llm.internal/metrics --token-file ~/.tok -o yaml > obs.yaml
      spectune recommend my-deployment.yaml --observed obs.yaml
      journalctl -u vllm | spectune observe --log -
    """
    from spectune.observe.faults import ObserveUsageError
    from spectune.render import render

    if (url is None) == (log_file is None):
        raise ObserveUsageError("give a metrics URL or --log FILE (one of them)")
    settings = _speculative_config(spec_config)
    if log_file is not None:
        from spectune.observe.log import observe_log

        obs = observe_log(log_file)
    else:
        from spectune.observe.api import observe_url

        with contextlib.ExitStack() as stack:
            progress: _Progress | None = None
            if not quiet and _stderr_is_terminal():
                ticks = max(1, int(window * 10))  # tenths of a second
                bar = stack.enter_context(click.progressbar(length=ticks, file=sys.stderr,
                                                            label=f"observing {window:g} s", show_eta=True))
                progress = _Progress(bar, ticks)
            obs = observe_url(url or "", window=window, interval=interval, model_name=model_name,
                              timeout=timeout, retries=retries, token_env=token_env, token_file=token_file,
                              ca_bundle=ca_bundle, insecure=insecure,
                              num_speculative_tokens=num_speculative_tokens, save_scrapes=save_scrapes,
                              progress=progress)
    if settings is not None:
        from dataclasses import replace

        obs = replace(obs, speculative_config=settings)
    click.echo(render(obs.to_dict(), fmt), nl=False)


def _speculative_config(text: str | None) -> dict[str, Any] | None:
    """``--speculative-config`` JSON as a mapping (exit 2 on anything else)."""
    if text is None:
        return None
    import json

    from spectune.observe.faults import ObserveUsageError

    try:
        cfg = json.loads(text)
    except ValueError as err:
        raise ObserveUsageError(f"--speculative-config: not JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise ObserveUsageError("--speculative-config: expected a JSON object, e.g. "
                                '\'{"method": "ngram", "num_speculative_tokens": 3}\'')
    return cfg


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
