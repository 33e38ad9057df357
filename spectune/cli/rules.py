"""The ``spectune rules`` click command: parses options, calls :func:`spectune.api.rules`,
prints the rules file. Listed in the command table of ``spectune.cli.main``."""

from __future__ import annotations

import shlex

import click

from spectune.base.limits import MAX_CONTEXT
from spectune.cli.params import DURATION, FiniteFloatRange


@click.command("rules", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", metavar="PROFILE|FLEET.yaml")
@click.option("--by", multiple=True, metavar="LABEL[,LABEL]",
              help="Group series by these labels too (model_name always), e.g. deployment.")
@click.option("--selector", metavar="'{LABEL=\"VALUE\",...}'",
              help="Label matchers every series must satisfy.")
@click.option("--tolerance", type=FiniteFloatRange(0, 0.99),
              help="Share of the recommended speedup that may be lost before an alert (default: check's, "
                   "0.03).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT),
              help="Context length (tokens) the thresholds are computed at (default: the profile's first).")
@click.option("--window", type=DURATION, default="10m", show_default=True,
              help="Rate window of the recording rules.")
@click.option("--for", "hold", type=DURATION, default="15m", show_default=True,
              help="How long a condition must hold before an alert fires.")
@click.option("--prometheus", metavar="URL", help="Prometheus URL for the commands in the annotations.")
@click.option("--grafana", is_flag=True,
              help="Print a Grafana dashboard (JSON) of the recorded series instead, the recommended gamma "
                   "and the break-even acceptance as reference lines.")
def rules_command(source: str, by: tuple[str, ...], selector: str | None, tolerance: float | None,
                  context: int | None, window: float, hold: float, prometheus: str | None,
                  grafana: bool) -> None:
    """Print Prometheus recording and alerting rules (a rules file) for the vLLM / SGLang
    deployments of PROFILE, or of every deployment of FLEET.yaml: acceptance, draft length
    and batch per deployment, and alerts whose thresholds spectune's cost model computes --
    acceptance below where the recommended gamma pays, speculation at a batch where it
    slows decode down (or off where it pays), a served draft length off the recommendation.

    \b
    Example:
      spectune rules FLEET.yaml > spectune.rules.yml    # then rule_files: in prometheus.yml
      spectune rules llama-3.1-70b-h100-eagle3 --by deployment --selector '{namespace="prod"}'
    """
    from spectune.api import rules

    words = ["spectune", "rules", source, *(w for b in by for w in ("--by", b))]
    words += [w for opt, v in (("--selector", selector), ("--tolerance", tolerance), ("--context", context),
                               ("--prometheus", prometheus)) if v is not None for w in (opt, str(v))]
    click.echo(rules(source, by=by, selector=selector, tolerance=tolerance, context=context, window=window,
                     hold=hold, prometheus=prometheus, grafana=grafana,
                     command=" ".join(shlex.quote(w) for w in words)), nl=False)
