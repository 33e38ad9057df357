"""``spectune report``: one self-contained HTML page on why gamma* changes with batch size
and context (:func:`spectune.api.report`, drawn by :mod:`spectune.render.report`)."""

from __future__ import annotations

import click

from spectune.base.notes import notes
from spectune.cli.options import calibration_option, complete_profile, what_if_options


@click.command("report")
@click.argument("profile", shell_complete=complete_profile)
@click.option("-o", "--output", "fmt", default="html", show_default=True, type=click.Choice(["html"]),
              help="Output format: one self-contained HTML page (no network needed to view it).")
@what_if_options
@calibration_option
def report_command(profile: str, fmt: str, batches: tuple[int, ...], contexts: tuple[int, ...],
                   gamma_max: int | None, alpha: float | None, observed: str | None,
                   prompt_tokens: float | None, output_tokens: float | None,
                   calibration: str | None) -> None:
    """An HTML report for PROFILE: why gamma* changes with batch size and context.

    A gamma* heatmap over batch x context coloured by speedup, Sp(gamma) curves, the verify
    step's per-component cost and marginal cost at a few batch sizes, acceptance per draft
    position, and every input with its source. The figures need matplotlib: pip install
    'spectune[report]' (from a checkout: pip install -e '.[report]').

    \b
    Example:
      spectune report llama-3.1-70b-h100-eagle3 > report.html
    """
    import spectune.api as api
    from spectune.render.formats import _clean
    from spectune.render.report import deploy_settings, report_html

    tuned, sources = api.report(profile, observation=observed, alpha=alpha, batch_sizes=batches,
                                context_lengths=contexts, gamma_max=gamma_max, calibration=calibration,
                                prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    rec = tuned.recommendation
    notes(rec.notes)
    doc = _clean(api.document(rec))
    click.echo(report_html(rec, doc, sources, deploy=deploy_settings(rec, tuned.batch_mix)), nl=False)
