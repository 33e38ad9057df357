"""What the commands share: the output option and printing a document, notes and warnings on
stderr, shell completion of built-in names, and the option sets several commands take
(what-if overrides, the target of a pass, --calibration, --prometheus and its companions).
No command module imports another; each takes what it shares from here and
:mod:`spectune.cli.params`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from spectune.base.limits import MAX_BATCH, MAX_CONTEXT, MAX_GAMMA, MAX_GPUS
from spectune.cli.params import DTYPE_OPTION, FiniteFloatRange, lengths_options

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "yaml", "json", "markdown")


def output_option(default: str = "table") -> Callable[[F], F]:
    return click.option("-o", "--output", "fmt", default=default, show_default=True,
                        type=click.Choice(FORMATS),
                        help="Output format. yaml/json are versioned documents for scripts.")


def echo_doc(doc: dict[str, Any], fmt: str, *, variant: str = "") -> None:
    """``doc`` rendered as ``fmt`` on stdout (:func:`spectune.render.formats.render`)."""
    from spectune.render.formats import render

    click.echo(render(doc, fmt, variant=variant), nl=False)


def warn(lines: Iterable[str]) -> None:
    """Each line as ``spectune: warning: ...`` on stderr (shown even with --quiet), through
    the one notes sink (:func:`spectune.base.notes.warning`)."""
    from spectune.base.notes import warning

    for w in lines:
        warning(w)


WIDE_CELL = 34  # characters a wide recommendation cell takes (gamma, speedup, TPOT, limiter)


def table_variant(detail: bool, fmt: str, columns: int) -> str:
    """'detail' on request; 'wide' when stdout is a terminal wide enough for ``columns``
    wide cells; else the default table."""
    if detail:
        return "detail"
    if fmt == "table" and sys.stdout.isatty():
        import shutil

        if shutil.get_terminal_size().columns >= 20 + WIDE_CELL * columns:
            return "wide"
    return ""


# --------------------------------------------------------------------------- completion
def _complete_names(kinds: tuple[str, ...], incomplete: str) -> list[Any]:
    """Built-in names of ``kinds`` (and 'examples', 'docs') starting with ``incomplete``."""
    from click.shell_completion import CompletionItem

    from spectune.api import profile_names

    return [CompletionItem(n, help=kind.rstrip("s")) for kind in kinds for n in profile_names(kind)
            if n.startswith(incomplete)]


def complete_profile(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """A shipped example's name, or a YAML file."""
    from click.shell_completion import CompletionItem

    return [*_complete_names(("examples",), incomplete), CompletionItem(incomplete, type="file")]


def completer(*kinds: str) -> Callable[[click.Context, click.Parameter, str], list[Any]]:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        return _complete_names(kinds, incomplete)

    return complete


# --------------------------------------------------------------------------- option sets
def _apply(opts: list[Callable[[F], F]], fn: F) -> F:
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


calibration_option = click.option(
    "--calibration", type=click.Path(dir_okay=False),
    help="Engine constants fitted by `spectune calibrate` (a Calibration YAML/JSON file).")


def what_if_options(fn: F) -> F:
    """--batch/--context/--gamma-max/--alpha/--observed and the lengths: recommend and report."""
    return lengths_options(_apply([
        click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
                     help="Batch size(s) to evaluate instead of the profile's (repeatable)."),
        click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
                     help="Context length(s) in tokens instead of the profile's (repeatable)."),
        click.option("--gamma-max", type=click.IntRange(1, MAX_GAMMA),
                     help="Largest draft length considered."),
        click.option("--alpha", type=FiniteFloatRange(0, 1),
                     help="Override acceptance with an i.i.d. per-token rate."),
        click.option("--observed", type=click.Path(dir_okay=False),
                     help="Acceptance and batch mix from a `spectune observe -o yaml` file (with "
                          "--match: one group of an `observe --prometheus` file)."),
    ], fn))


def target_options(fn: F) -> F:
    """Where a pass runs (GPU, model, parallelism, engine): cost and speedup."""
    return _apply([
        click.option("--profile", shell_complete=complete_profile,
                     help="Take GPU, model, parallelism and engine from a deployment profile."),
        click.option("--gpu", shell_complete=completer("gpus"),
                     help="Built-in GPU name (spectune profiles list gpus)."),
        click.option("--model", shell_complete=completer("models"),
                     help="Built-in model name, a Hugging Face config.json or a model folder holding one."),
        DTYPE_OPTION,
        click.option("--tp", type=click.IntRange(1, MAX_GPUS), help="Tensor-parallel size."),
        click.option("--ep", type=click.IntRange(1, MAX_GPUS), help="Expert-parallel size (1 or tp*dp)."),
        click.option("--dp", type=click.IntRange(1, MAX_GPUS), help="Data-parallel (attention) size."),
        click.option("--engine", shell_complete=completer("engines"),
                     help="Serving engine profile (a built-in name: `spectune profiles list engines`; "
                          "or a file) or 'none' for the pure roofline."),
    ], fn)


def prometheus_options(fn: F) -> F:
    """--prometheus and what narrows it: observe, recommend and fleet."""
    return _apply([
        click.option("--prometheus", metavar="URL",
                     help="Ask this Prometheus (base URL) instead of scraping one server: one observation "
                          "per group of servers it scrapes."),
        click.option("--selector", metavar="'{LABEL=\"VALUE\",...}'",
                     help="With --prometheus: label matchers every series must satisfy."),
        click.option("--by", multiple=True, metavar="LABEL[,LABEL]",
                     help="With --prometheus: group by these labels too (model_name always), e.g. "
                          "deployment."),
        click.option("--at", metavar="TIME",
                     help="With --prometheus: the window's end (RFC 3339 or Unix seconds; default now)."),
        click.option("--org-id", metavar="TENANT",
                     help="With --prometheus: X-Scope-OrgID header (Cortex, Mimir, Thanos tenants)."),
    ], fn)
