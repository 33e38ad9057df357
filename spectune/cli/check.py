"""``spectune check``: the CI gate of a deployed serving configuration (or a directory of
manifests) against the profile's recommendation (:func:`spectune.api.check`,
:func:`spectune.api.check_directory`)."""

from __future__ import annotations

import os
import sys

import click

from spectune.base.errors import InputError
from spectune.base.limits import DEFAULT_CHECK_TOLERANCE
from spectune.cli.options import calibration_option, echo_doc, output_option, warn
from spectune.cli.params import FiniteFloatRange, lengths_options


def _verdict(doc: dict[str, object], code: int, fmt: str) -> None:
    """The report on stdout (flushed here: a reader that went away must not turn the verdict
    into 0 or 120), then the exit code of the verdict."""
    try:
        echo_doc(doc, fmt)
        sys.stdout.flush()
    except BrokenPipeError:
        from spectune.cli.main import stdout_gone

        stdout_gone()
    if code:
        click.echo(f"spectune: check failed: {doc['summary']}", err=True)
        sys.exit(code)


@click.command("check")
@click.argument("serving_config", metavar="SERVING_CONFIG")
@click.option("--profile",
              help="Deployment profile the configuration serves (file, '-' or shipped example).")
@click.option("--profiles", "profile_map", type=click.Path(dir_okay=False),
              help="With a directory SERVING_CONFIG: YAML mapping each manifest to its profile.")
@click.option("--tolerance", type=FiniteFloatRange(0, 1), default=DEFAULT_CHECK_TOLERANCE, show_default=True,
              help="Largest acceptable shortfall from the recommended settings' speedup at any point.")
@lengths_options
@calibration_option
@output_option()
def check_command(serving_config: str, profile: str | None, profile_map: str | None, tolerance: float,
                  prompt_tokens: float | None, output_tokens: float | None, calibration: str | None,
                  fmt: str) -> None:
    """Gate a deployed serving configuration against PROFILE's recommendation (for CI).

    SERVING_CONFIG is a `vllm serve --config` YAML file, a text file or shell script with a
    `vllm serve ...` / `python -m vllm.entrypoints.openai.api_server ...` /
    `python -m sglang.launch_server ...` command, or a Kubernetes manifest whose container
    command/args run one. Its speculation is predicted at every operating point of the
    profile, without speculation, with the recommended settings (what `spectune emit` prints:
    the best the engine can be set to, a gamma per batch size or one static gamma) and at
    gamma* per point (reported, not gated).

    \b
    Exit codes: 0 within --tolerance of the recommended settings' speedup everywhere;
    1 more than that left on the table somewhere, or speculation slows a point down;
    2 bad input (unparseable file, no engine command, bad profile).
    A point of marginal gain (the recommended speedup's band reaches below 1.0x; marked
    with a dagger, marginal_gain: true) fails only when speculation slows it down: not
    speculating there passes, and a configured gain there is no certain win (see notes).
    -o markdown writes a report for a pull request (verdict, per-point table, fix).

    \b
    GitOps: SERVING_CONFIG may be a directory of manifests, with --profiles MAP.yaml mapping
    each to its profile (examples/gitops/):
      spectune check DEPLOY_DIR --profiles PROFILE_MAP.yaml
    """
    import spectune.api as api

    if os.path.isdir(serving_config) or profile_map:  # never raises, whatever the name
        if not (os.path.isdir(serving_config) and profile_map) or profile:
            raise InputError("check a directory of manifests with --profiles MAP.yaml (not --profile)")
        if prompt_tokens or output_tokens:
            raise InputError("--prompt-tokens / --output-tokens check one profile; a directory's profiles "
                             "give their own workload.prompt_tokens / output_tokens")
        doc, code, warnings = api.check_directory(serving_config, profile_map, tolerance)
        warn(warnings)
        _verdict(doc, code, fmt)
        return
    if not profile:
        raise InputError("give --profile PROFILE (or a directory of manifests and --profiles MAP.yaml)")
    result = api.check(serving_config, profile, tolerance, calibration=calibration,
                       prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    warn(result.warnings)
    _verdict(result.document, result.exit_code, fmt)
