"""``spectune emit``: the serving-engine settings for a profile's recommendation and nothing
else (:func:`spectune.api.tune`, :func:`spectune.api.emit`); notes go to stderr."""

from __future__ import annotations

import click

from spectune.base.errors import InputError
from spectune.base.limits import DEFAULT_ADAPTIVE_CONFIG, MAX_BATCH
from spectune.base.notes import notes
from spectune.cli.options import complete_profile
from spectune.cli.params import KindsHelp, LazyChoice, emit_kinds, lengths_options


def batch_mix(values: tuple[str, ...]) -> dict[int, float] | None:
    """``--batch-mix BATCH:WEIGHT`` values as batch size -> weight (None when none given)."""
    mix: dict[int, float] = {}
    for v in values:
        b, sep, w = v.partition(":")
        try:
            if not sep:
                raise ValueError
            batch, weight = int(b), float(w)
        except ValueError:
            raise InputError(f"--batch-mix expects BATCH:WEIGHT (e.g. 32:0.5), got {v!r}") from None
        if not 1 <= batch <= MAX_BATCH or not 0 <= weight < float("inf"):
            raise InputError(f"--batch-mix {v!r}: batch must be a whole number from 1 to {MAX_BATCH:,} "
                             "and weight a finite number >= 0")
        mix[batch] = weight
    return mix or None


@click.command("emit", cls=KindsHelp)
@click.argument("profile", shell_complete=complete_profile)
@click.argument("kind", type=LazyChoice(emit_kinds))
@click.option("--batch-mix", "batch_mix_values", multiple=True, metavar="BATCH:WEIGHT",
              help="Observed share of time at a batch size (repeatable); picks the static gamma "
                   "when one must serve every batch size (vLLM with dp > 1, SGLang without "
                   "adaptive speculation). Default: the profile's operating points, equally.")
@click.option("--observed", type=click.Path(dir_okay=False, allow_dash=True),
              help="Measured acceptance, operating points and batch mix from a `spectune observe "
                   "-o yaml` file, as `recommend --observed` takes them.")
@click.option("--adaptive-config-path", default=DEFAULT_ADAPTIVE_CONFIG, show_default=True,
              help="With sglang: the file name --speculative-adaptive-config points at.")
@lengths_options
@click.option("--engine-version", metavar="RELEASE",
              help="The engine release the settings are for [default: the engine profile's version]; "
                   "before vLLM 0.24.0 one static gamma replaces the per-batch-size schedule.")
def emit_command(profile: str, kind: str, batch_mix_values: tuple[str, ...], observed: str | None,
                 adaptive_config_path: str, prompt_tokens: float | None, output_tokens: float | None,
                 engine_version: str | None) -> None:
    """Print the serving-engine settings for PROFILE's recommendation, and nothing else.

    \b
    KIND:
    {kinds}

    Notes (why a static K, speculation off, ...) go to stderr, so the output can go
    straight into $(...) or a file:

    \b
      vllm serve MODEL --speculative-config "$(spectune emit PROFILE vllm)"

    \b
    Examples:
      spectune emit llama-3.1-70b-h100-eagle3 vllm
      spectune emit llama-3.1-70b-h100-eagle3 vllm-yaml
      spectune emit deepseek-v4-flash-8xb200-ep vllm --batch-mix 64:0.7 --batch-mix 512:0.3
    """
    import spectune.api as api

    tuned = api.tune(profile, observation=observed, batch_mix=batch_mix(batch_mix_values),
                     prompt_tokens=prompt_tokens, output_tokens=output_tokens, engine_version=engine_version)
    snip = api.emit(tuned, kind, adaptive_path=adaptive_config_path)
    rec = tuned.recommendation
    notes([*rec.notes, *([tuned.mix_note] if tuned.mix_note else []), *snip.notes])
    click.echo(snip.text, nl=False)
