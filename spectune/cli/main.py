"""The ``spectune`` command line: parse options, call the library, hand the result to
:mod:`spectune.render.formats`. No arithmetic lives here.

Exit codes: :class:`spectune.exit_codes.ExitCode` (0 ok; 1 a ``check`` gate failed; 2 usage
or input error; 3-10 network faults of ``observe``; 70 an internal error, never 1).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from spectune.cli.observe import DURATION, prometheus_options
from spectune.cli.params import DTYPE_OPTION, QUIET_HELP, FiniteFloatRange, add_quiet, lengths_options
from spectune.errors import InputError, SpectuneError
from spectune.exit_codes import ExitCode
from spectune.limits import (
    COST_RATIO,
    DEFAULT_ADAPTIVE_CONFIG,
    DEFAULT_CHECK_TOLERANCE,
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WINDOW_SECONDS,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GAMMA,
    MAX_GPUS,
    MAX_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
)
from spectune.notes import notes, set_quiet
from spectune.version import __version__

F = TypeVar("F", bound=Callable[..., Any])


def output_option(default: str = "table") -> Callable[[F], F]:
    return click.option("-o", "--output", "fmt", default=default, show_default=True,
                        type=click.Choice(["table", "yaml", "json", "markdown"]),
                        help="Output format. yaml/json are versioned documents for scripts.")


def emit(doc: dict[str, Any], fmt: str, *, variant: str = "") -> None:
    from spectune.render.formats import render

    click.echo(render(doc, fmt, variant=variant), nl=False)


WIDE_CELL = 34  # characters a wide recommendation cell takes (gamma, speedup, TPOT, limiter)


def _table_variant(detail: bool, fmt: str, columns: int) -> str:
    """'detail' on request; 'wide' when stdout is a terminal wide enough for ``columns``
    wide cells; else the default table."""
    if detail:
        return "detail"
    if fmt == "table" and sys.stdout.isatty():
        import shutil

        if shutil.get_terminal_size().columns >= 20 + WIDE_CELL * columns:
            return "wide"
    return ""


def gate(text: str) -> str:
    """``text`` through :func:`spectune.redact.gate` (no credential printed) when that
    module is loaded -- every network client loads it; other commands do not pay for it."""
    redact = sys.modules.get("spectune.redact")
    return text if redact is None else str(redact.gate(text))


def fail(err: SpectuneError) -> NoReturn:
    click.echo(f"spectune: error: {gate(err.message)}", err=True)
    sys.exit(err.exit_code)


def stdout_gone() -> None:
    """The reader of stdout went away (``| head``): point stdout at /dev/null so that no
    later write or the interpreter's final flush fails; the exit code stays ours."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
        pass


def internal_error(exc: BaseException) -> NoReturn:
    """A bug: one line and exit 70 (never 1, which `check` uses for a failed gate);
    ``SPECTUNE_DEBUG=1`` shows the traceback."""
    if os.environ.get("SPECTUNE_DEBUG"):
        import traceback

        traceback.print_exc()
    text = gate((str(exc).splitlines() or [""])[0])[:200]
    click.echo(f"spectune: internal error (a bug in spectune, not in your input): "
               f"{type(exc).__name__}{': ' + text if text else ''}; please report it with the "
               "command that caused it (SPECTUNE_DEBUG=1 shows the traceback)", err=True)
    sys.exit(ExitCode.INTERNAL)


# --------------------------------------------------------------------------- completion
def _complete_names(kinds: tuple[str, ...], incomplete: str) -> list[Any]:
    """Built-in names of ``kinds`` (and 'examples') starting with ``incomplete``."""
    from click.shell_completion import CompletionItem

    from spectune.documents.profiles import builtin_names, example_names
    from spectune.documents.shipped import doc_names

    out = []
    for kind in kinds:
        if kind in ("examples", "docs"):
            names = example_names() if kind == "examples" else doc_names()
        else:
            names = builtin_names(kind)
        out += [CompletionItem(n, help=kind.rstrip("s")) for n in names if n.startswith(incomplete)]
    return out


def complete_profile(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """A shipped example's name, or a YAML file."""
    from click.shell_completion import CompletionItem

    return [*_complete_names(("examples",), incomplete), CompletionItem(incomplete, type="file")]


def _completer(*kinds: str) -> Callable[[click.Context, click.Parameter, str], list[Any]]:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        return _complete_names(kinds, incomplete)

    return complete


class SpectuneGroup(click.Group):
    """Turns a user-facing error into one line on stderr and its exit code, and anything
    else that escapes a command into an internal error (exit 70)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's own handling, except that a usage error is one line (exit 2), an
        interrupt exits 130 and a closed stdout exits 0 -- click exits 1 for both, the code
        ``check`` keeps for a failed gate."""
        kwargs["standalone_mode"] = False
        add_quiet(self)
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.UsageError as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # bare `spectune`: the help, as click shows it
                err.show()
                sys.exit(ExitCode.USAGE)
            where = f" (see: {err.ctx.command_path} --help)" if err.ctx is not None else ""
            click.echo(f"spectune: error: {err.format_message()}{where}", err=True)
            sys.exit(ExitCode.USAGE)
        except click.exceptions.ClickException as err:
            click.echo(f"spectune: error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.exceptions.Abort:
            click.echo("spectune: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            stdout_gone()
            sys.exit(ExitCode.OK)
        except (Exception, RecursionError, MemoryError) as exc:  # a bug outside a command's body
            internal_error(exc)
        sys.exit(rv if isinstance(rv, int) else ExitCode.OK)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SpectuneError as err:
            fail(err)
        except BrokenPipeError:  # `spectune ... | head` is not an error (check keeps its verdict itself)
            stdout_gone()
            sys.exit(ExitCode.OK)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (Exception, RecursionError, MemoryError) as exc:
            internal_error(exc)


@click.group(cls=SpectuneGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spectune")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.pass_context
def cli(ctx: click.Context, quiet: bool) -> None:
    """Tune speculative decoding (draft length gamma) for LLM serving.

    spectune prices one verify step and the drafter with a roofline cost model (MoE expert
    traffic, MLA / compressed attention, collectives, engine overheads), combines it with
    acceptance (stated, measured on a running vLLM / SGLang server, or for n-gram drafting
    an assumed prior, said so) and recommends the gamma that maximises throughput at each
    batch size and context length. gamma = 0 means: do not speculate there.

    \b
    Start with a shipped example (spectune profiles list examples):
      spectune recommend llama-3.1-70b-h100-eagle3
      spectune report llama-3.1-70b-h100-eagle3 > report.html
      spectune cost --gpu b200 --model deepseek-v4-flash --batch 32 --tokens 4 --context 8192
      spectune widthdepth qwen3.6-35b-a3b-b200-mtp --positions 22 --batch 11 --alpha 0.9
      spectune recommend qwen3.6-35b-a3b-b200-mtp --ragged --tpot-slo 25ms
      spectune profiles list
    Shell completion: spectune completion --help
    """
    set_quiet(quiet)  # each subcommand's own --quiet may still turn it on
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


calibration_option = click.option(
    "--calibration", type=click.Path(dir_okay=False),
    help="Engine constants fitted by `spectune calibrate` (a Calibration YAML/JSON file).")


def calibrated(dep: Any, calibration: str | None) -> Any:
    """``dep`` with a Calibration file applied (unchanged without one)."""
    if not calibration:
        return dep
    from spectune.documents.calibration import apply_calibration, load_calibration

    return apply_calibration(dep, load_calibration(calibration))


# --------------------------------------------------------------------------- recommend
def _what_if_options(fn: F) -> F:
    """--batch/--context/--gamma-max/--alpha/--observed: shared by recommend and report."""
    opts = [
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
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return lengths_options(fn)


def _deployment(profile: str, batches: tuple[int, ...], contexts: tuple[int, ...],
                gamma_max: int | None, alpha: float | None, observed: str | None,
                observation: Any = None, match: tuple[str, ...] = (),
                calibration: str | None = None,
                lengths: tuple[float | None, float | None] = (None, None),
                ) -> tuple[Any, dict[int, float] | None]:
    """The profile (with a Calibration file applied) with an observation and what-if overrides
    applied, and the observed batch mix (None without an observation). Notes go to stderr."""
    from spectune.core.lengths import with_lengths
    from spectune.documents.profiles import load_deployment
    from spectune.overrides import prepare

    dep = calibrated(load_deployment(profile), calibration)
    if observed:
        from spectune.observe.prometheus import load_observed

        observation = load_observed(observed, match)
    prepared = prepare(dep, observation=observation, alpha=alpha, batch_sizes=batches,
                       context_lengths=contexts, gamma_max=gamma_max)
    notes(prepared.notes)
    return with_lengths(prepared.deployment, *lengths, contexts_given=bool(contexts)), prepared.batch_mix


@cli.command()
@click.argument("profile", shell_complete=complete_profile)
@output_option()
@_what_if_options
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
@click.option("--emit", "emit_kind", type=click.Choice(["vllm", "vllm-yaml", "sglang"]),
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
    if prometheus:
        from spectune.cli.fleet import recommend_prometheus

        if (observed or metrics_url or alpha is not None or batches or contexts or prompt_tokens
                or output_tokens):
            raise InputError("--prometheus takes acceptance and operating points from Prometheus: "
                             "not with --observed, --metrics-url, --alpha, --batch, --context, "
                             "--prompt-tokens or --output-tokens")
        recommend_prometheus(profile, prometheus, match, fmt, emit_kind, gamma_max, dict(
            window=window, interval=interval, selector=selector, by=by, at=at, timeout=30.0,
            token_env=DEFAULT_TOKEN_ENV, token_file=token_file, ca_bundle=ca_bundle,
            insecure=False, org_id=org_id))
        return
    from spectune.core.recommend import recommend as run
    from spectune.documents.results import recommendation_doc

    if observed and metrics_url:
        raise InputError("give --observed FILE or --metrics-url URL, not both")
    observation = None
    if metrics_url:
        from spectune.observe.api import observe_url

        observation = observe_url(metrics_url, window=window or DEFAULT_WINDOW_SECONDS, interval=interval,
                                  model_name=model_name, token_file=token_file, ca_bundle=ca_bundle)
    dep, mix = _deployment(profile, batches, contexts, gamma_max, alpha, observed, observation, match,
                           calibration, (prompt_tokens, output_tokens))
    rec = run(dep)
    if emit_kind:
        from spectune.engines.emit import build_snippet

        notes(rec.notes)
        snip = build_snippet(rec, emit_kind, mix)
        notes(snip.notes)
        click.echo(snip.text, nl=False)
        return
    extras = _seed003_extras(dep, ragged or bool(rounds_file), rounds_file, tpot_slo)  # bad input first
    notes(rec.notes)
    doc = recommendation_doc(rec, *extras)
    emit(doc, fmt, variant=_table_variant(detail, fmt, len(doc["context_lengths"])))


# --------------------------------------------------------------------------- report
@cli.command("report")
@click.argument("profile", shell_complete=complete_profile)
@click.option("-o", "--output", "fmt", default="html", show_default=True, type=click.Choice(["html"]),
              help="Output format: one self-contained HTML page (no network needed to view it).")
@_what_if_options
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
    from spectune.core.recommend import recommend as run
    from spectune.documents.profiles import builtin_sources
    from spectune.documents.results import recommendation_doc
    from spectune.render.formats import _clean
    from spectune.render.report import deploy_settings, report_html

    dep, mix = _deployment(profile, batches, contexts, gamma_max, alpha, observed,
                           calibration=calibration, lengths=(prompt_tokens, output_tokens))
    rec = run(dep)
    notes(rec.notes)
    doc = _clean(recommendation_doc(rec))
    click.echo(report_html(rec, doc, builtin_sources(dep), deploy=deploy_settings(rec, mix)), nl=False)


def _seed003_extras(dep: Any, ragged: bool, rounds_file: str | None,
                    tpot_slo: str | None) -> tuple[Any, Any]:
    """The ragged simulation and SLO goodput when asked for (imported only then)."""
    grid = goodput = None
    if ragged:
        from spectune.core.ragged import HEADROOM_NOTE, rounds_for, simulate

        if rounds_file:
            from spectune.documents.rounds_file import load_rounds

            rounds = load_rounds(rounds_file)
        else:
            rounds = rounds_for(dep)
        grid = simulate(dep, rounds)
        notes([HEADROOM_NOTE])
    slo = dep.tpot_slo
    if tpot_slo is not None:
        from spectune.cli.observe import tpot_seconds

        slo = tpot_seconds(tpot_slo)
    if slo is not None:
        from spectune.core.slo import goodput as run_goodput

        goodput = run_goodput(dep, slo)
    return grid, goodput


# --------------------------------------------------------------------------- cost
def warn_if_too_big(mem: Any, batch: int, context: int) -> None:
    """A warning on stderr when one operating point's memory (:class:`spectune.core.memory.Memory`)
    does not fit the GPU. The step is still priced: studying a GPU's roofline beyond what it
    holds is legitimate."""
    from spectune.core.memory import infeasible_reason

    if not bool(mem.feasible):
        click.echo(f"spectune: warning: batch {batch} at context {context:,} does not fit in "
                   f"memory: {infeasible_reason(mem, ())}", err=True)


_common = [
    click.option("--profile", shell_complete=complete_profile,
                 help="Take GPU, model, parallelism and engine from a deployment profile."),
    click.option("--gpu", shell_complete=_completer("gpus"),
                 help="Built-in GPU name (spectune profiles list gpus)."),
    click.option("--model", shell_complete=_completer("models"),
                 help="Built-in model name, a Hugging Face config.json or a model folder holding one."),
    DTYPE_OPTION,
    click.option("--tp", type=click.IntRange(1, MAX_GPUS), help="Tensor-parallel size."),
    click.option("--ep", type=click.IntRange(1, MAX_GPUS), help="Expert-parallel size (1 or tp*dp)."),
    click.option("--dp", type=click.IntRange(1, MAX_GPUS), help="Data-parallel (attention) size."),
    click.option("--engine", shell_complete=_completer("engines"),
                 help="Serving engine profile (vllm, sglang) or 'none' for the pure roofline."),
]


def common_options(fn: F) -> F:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


@cli.command()
@common_options
@click.option("--batch", "batches", type=click.IntRange(1, MAX_BATCH), required=True, multiple=True,
              help="Sequences in the step (B). Repeat to compare batch sizes side by side.")
@click.option("--tokens", type=click.IntRange(1, 65), default=1, show_default=True,
              help="New tokens per sequence (T = gamma + 1 for a verify).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT), required=True,
              help="Tokens in each KV cache (S).")
@click.option("--peak", is_flag=True, help="Use peak rates instead of achievable fractions.")
@click.option("--coactivation", type=FiniteFloatRange(0, 1),
              help="MoE routing: share F of a token's experts the previous position of its sequence "
                   "also used; overrides the profile's routing. 0 with no skew = uniform.")
@lengths_options
@output_option()
def cost(profile: str | None, gpu: str | None, model: str | None, dtypes: tuple[str, ...], tp: int | None,
         ep: int | None, dp: int | None, engine: str | None, batches: tuple[int, ...],
         tokens: int, context: int, peak: bool, coactivation: float | None,
         prompt_tokens: float | None, output_tokens: float | None, fmt: str) -> None:
    """Cost of one forward pass per GPU, by component.

    Shows FLOPs, bytes, time, arithmetic intensity, which roofline bound applies and the
    marginal cost r of one more verified token for each component: why gamma* moves.
    With several --batch values, a sweep: each component's share of the step and its r
    per batch size.

    \b
    Examples:
      spectune cost --gpu b200 --model deepseek-v4-flash --batch 4 --tokens 4 --context 8192
      spectune cost --profile qwen3-30b-a3b-h100-eagle3 --batch 1 --batch 256 --tokens 3 --context 8192
    """
    from spectune.documents.results import sweep_doc
    from spectune.documents.user_model import parse_dtypes
    from spectune.pricing import pass_lengths, price_pass, resolve_target

    target = resolve_target(profile, gpu=gpu, model=model, tp=tp, ep=ep, dp=dp, engine=engine,
                            coactivation=coactivation, dtypes=parse_dtypes(dtypes))
    lengths = pass_lengths(target, prompt_tokens, output_tokens)
    passes = [price_pass(target, batch, tokens, context, achieved=not peak, lengths=lengths)
              for batch in batches]
    for pc in passes:
        warn_if_too_big(pc.memory, pc.batch, context)
    docs = [pc.to_dict() for pc in passes]
    emit(docs[0] if len(docs) == 1 else sweep_doc(docs), fmt)


# --------------------------------------------------------------------------- widthdepth
@cli.command("widthdepth")
@click.argument("profile")
@click.option("--positions", type=click.IntRange(2, MAX_BATCH), required=True,
              help="Positions the engine works on per step (N).")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH),
              help="Sequences when N is spent as depth; each verifies N / batch positions "
                   "(default N / 2: one draft each).")
@click.option("--alpha", type=FiniteFloatRange(0, 1),
              help="i.i.d. acceptance per draft token (default: the profile's acceptance).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT), default=0, show_default=True,
              help="Tokens in each KV cache; 0 = leave KV movement out (the width-vs-depth "
                   "question as usually posed).")
@click.option("--coactivation", type=FiniteFloatRange(0, 1),
              help="Override the profile's routing co-activation F.")
@click.option("--with-drafter", is_flag=True,
              help="Price the profile's drafter (by default drafting is taken as free).")
@click.option("--with-engine", is_flag=True,
              help="Add the profile's engine overheads (default: the pure roofline).")
@output_option()
def widthdepth(profile: str, positions: int, batch: int | None, alpha: float | None, context: int,
               coactivation: float | None, with_drafter: bool, with_engine: bool, fmt: str) -> None:
    """Spend N positions per step as width (N sequences) or as depth (speculation)?

    The width-vs-depth question for PROFILE's model and GPU: throughput of batching N
    sequences against verifying N / batch positions of each of `batch` sequences at
    acceptance alpha, with the expert and attention bytes each moves. Under uniform routing
    the two move the same experts; co-activation of consecutive positions (the profile's
    `routing: {coactivation: F}`) makes depth cheaper.
    """
    from spectune.api import widthdepth as run

    emit(run(profile, positions=positions, batch=batch, alpha=alpha, context=context,
             coactivation=coactivation, with_drafter=with_drafter, with_engine=with_engine), fmt)


# --------------------------------------------------------------------------- speedup
@cli.command()
@common_options
@click.option("--alpha", type=FiniteFloatRange(0, 1), help="i.i.d. per-token acceptance.")
@click.option("--gamma", type=click.IntRange(0, MAX_GAMMA), required=True, help="Draft length.")
@click.option("--draft-cost", type=FiniteFloatRange(*COST_RATIO),
              help="Draft cost ratio c (draft token / target step).")
@click.option("--drafter", shell_complete=_completer("drafters"),
              help="Built-in drafter (with --gpu/--model), e.g. ngram.")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH), help="Batch size, for the roofline speedup.")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT),
              help="Context length, for the roofline speedup.")
@lengths_options
@calibration_option
@output_option()
def speedup(profile: str | None, gpu: str | None, model: str | None, dtypes: tuple[str, ...], tp: int | None,
            ep: int | None, dp: int | None, engine: str | None, alpha: float | None,
            gamma: int, draft_cost: float | None, drafter: str | None, batch: int | None,
            context: int | None, prompt_tokens: float | None, output_tokens: float | None,
            calibration: str | None, fmt: str) -> None:
    """Predicted speedup of one gamma.

    With only --alpha/--gamma/--draft-cost: the closed form of Leviathan et al. (2023, "Fast
    Inference from Transformers via Speculative Decoding") with a free verify,
    (1 - a^(g+1)) / ((1 - a)(1 + g c)). With --gpu/--model or --profile and
    --batch/--context: the roofline speedup m(g) C0 / (C_verify(g+1) + C_draft(g)).

    \b
    Examples:
      spectune speedup --alpha 0.7 --gamma 4 --draft-cost 0.1
      spectune speedup --gpu h100-sxm --model llama-3.1-8b --drafter ngram --alpha 0.6 --gamma 3 \\
        --batch 16 --context 4096
    """
    from spectune.core.speedup import point_speedup
    from spectune.documents.results import closed_form_doc, point_speedup_doc
    from spectune.pricing import resolve_target, speedup_deployment

    if not (profile or gpu or model):
        if alpha is None:
            raise InputError("--alpha is required for the closed form")
        emit(closed_form_doc(alpha, gamma, draft_cost or 0.0), fmt)
        return
    if batch is None or context is None:
        raise InputError("the roofline speedup needs --batch and --context")
    from spectune.documents.user_model import parse_dtypes

    where = resolve_target(profile, gpu=gpu, model=model, tp=tp, ep=ep, dp=dp, engine=engine,
                           dtypes=parse_dtypes(dtypes))
    target = speedup_deployment(where, batch, context, drafter=drafter or None, draft_cost=draft_cost,
                                alpha=alpha)
    from spectune.core.memory import memory

    warn_if_too_big(memory(target.model, target.drafter, target.gpu, target.parallelism, batch, context,
                           gamma), batch, context)
    target = calibrated(target, calibration)
    from spectune.core.lengths import lengths_notes, with_lengths
    from spectune.core.priors import assumed_note

    target = with_lengths(target, prompt_tokens, output_tokens, contexts_given=True)
    notes([n for n in (assumed_note(target.acceptance), *lengths_notes(target.workload)) if n])
    emit(point_speedup_doc(target, batch, context, gamma, point_speedup(target, batch, context, gamma)), fmt)


# --------------------------------------------------------------------------- profiles
@cli.group()
def profiles() -> None:
    """Built-in GPU, model, drafter and engine profiles."""


@profiles.command("list")
@click.argument("kind", required=False,
                type=click.Choice(["gpus", "models", "drafters", "engines", "examples"]))
@output_option()
def profiles_list(kind: str | None, fmt: str) -> None:
    """List built-in profiles (all kinds, or one KIND).

    \b
    Example:
      spectune profiles list examples
    """
    from spectune.api import list_profiles

    emit(list_profiles(kind), fmt)


@profiles.command("show")
@click.argument("name", shell_complete=_completer("gpus", "models", "drafters", "engines", "examples"))
@click.option("--kind", type=click.Choice(["gpus", "models", "drafters", "engines", "examples"]),
              help="Which kind NAME is (needed only when names collide).")
def profiles_show(name: str, kind: str | None) -> None:
    """Print a built-in profile or shipped example as shipped, with its source comments.

    \b
    Examples:
      spectune profiles show b200
      spectune profiles show llama-3.1-70b-h100-eagle3
    """
    from spectune.documents.profiles import KINDS, builtin_path, example_path

    for k in [kind] if kind else [*KINDS, "examples"]:
        try:
            path = example_path(name) if k == "examples" else builtin_path(k, name)
        except InputError:
            continue
        click.echo(path.read_text(encoding="utf-8"), nl=False)
        return
    from spectune.documents.names import did_you_mean
    from spectune.documents.profiles import builtin_names, example_names

    hint = did_you_mean(name, [(n, k) for k in ([kind] if kind else [*KINDS, "examples"])
                               for n in (example_names() if k == "examples" else builtin_names(k))])
    raise InputError(f"no built-in profile named {name!r}{hint} (see: spectune profiles list)")


# --------------------------------------------------------------------------- emit
def _batch_mix(values: tuple[str, ...]) -> dict[int, float] | None:
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


@cli.command("emit")
@click.argument("profile", shell_complete=complete_profile)
@click.argument("kind", type=click.Choice(["vllm", "vllm-yaml", "vllm-python", "sglang",
                                           "sglang-adaptive-config"]))
@click.option("--batch-mix", "batch_mix", multiple=True, metavar="BATCH:WEIGHT",
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
def emit_command(profile: str, kind: str, batch_mix: tuple[str, ...], observed: str | None,
                 adaptive_config_path: str, prompt_tokens: float | None, output_tokens: float | None,
                 engine_version: str | None) -> None:
    """Print the serving-engine settings for PROFILE's recommendation, and nothing else.

    \b
    KIND:
      vllm                    JSON for --speculative-config
      vllm-yaml               a `vllm serve --config` YAML file
      vllm-python             speculative_config = {...} for vllm.LLM(...)
      sglang                  --speculative-* flags for python -m sglang.launch_server
      sglang-adaptive-config  the JSON file --speculative-adaptive-config reads

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
    from spectune.core.recommend import recommend as run
    from spectune.documents.profiles import load_deployment
    from spectune.engines.emit import build_snippet
    from spectune.overrides import prepare

    dep = load_deployment(profile)
    if engine_version is not None:
        from dataclasses import replace

        from spectune.engines.engine_version import parse_engine_version

        dep = replace(dep, engine=replace(dep.engine, version=parse_engine_version(engine_version)))
    observation = None
    if observed:
        from spectune.documents.observation import load_observation

        observation = load_observation(observed)
    prepared = prepare(dep, observation=observation, batch_mix=_batch_mix(batch_mix))
    dep, mix, found = prepared.deployment, prepared.batch_mix, list(prepared.notes)
    from spectune.core.lengths import with_lengths

    dep = with_lengths(dep, prompt_tokens, output_tokens)
    if observation is not None and prepared.observed_mix is None:
        from spectune.observe.apply import missing_mix_note

        found.append(missing_mix_note(observation, observed or ""))
    rec = run(dep)
    snip = build_snippet(rec, kind, mix, adaptive_path=adaptive_config_path)
    notes([*found, *rec.notes, *snip.notes])
    click.echo(snip.text, nl=False)


# --------------------------------------------------------------------------- check
@cli.command("check")
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
    from spectune.documents.profiles import load_deployment
    from spectune.engines.serving_config import read_serving_config
    from spectune.gate import check

    if os.path.isdir(serving_config) or profile_map:  # never raises, whatever the name
        from spectune.gitops import check_directory

        if not (os.path.isdir(serving_config) and profile_map) or profile:
            raise InputError("check a directory of manifests with --profiles MAP.yaml (not --profile)")
        if prompt_tokens or output_tokens:
            raise InputError("--prompt-tokens / --output-tokens check one profile; a directory's profiles "
                             "give their own workload.prompt_tokens / output_tokens")
        doc, code = check_directory(serving_config, profile_map, tolerance,
                                    lambda w: click.echo(f"spectune: warning: {w}", err=True))
        emit(doc, fmt)
        if code:
            click.echo(f"spectune: check failed: {doc['summary']}", err=True)
            sys.exit(code)
        return
    if not profile:
        raise InputError("give --profile PROFILE (or a directory of manifests and --profiles MAP.yaml)")
    conf = read_serving_config(serving_config)
    from spectune.core.lengths import with_lengths

    dep = with_lengths(calibrated(load_deployment(profile), calibration), prompt_tokens, output_tokens)
    result = check(conf, dep, tolerance)
    for w in result.warnings:
        click.echo(f"spectune: warning: {w}", err=True)
    try:  # flushed here: a reader that went away must not turn the verdict into 0 (or 120)
        emit(result.document, fmt)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()
    if result.exit_code:
        click.echo(f"spectune: check failed: {result.document['summary']}", err=True)
        sys.exit(result.exit_code)


# --------------------------------------------------------------------------- init
@cli.command("init")
@click.option("--gpu", help="Built-in device (spectune profiles list gpus), e.g. h100-sxm or cpu.")
@click.option("--model", help="Built-in model name, a Hugging Face config.json, or a model folder.")
@DTYPE_OPTION
@click.option("--drafter", default="ngram", show_default=True, help="Built-in drafter.")
@click.option("--engine", help="Serving engine profile (vllm, sglang). Default: the server's, else vllm.")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--ep", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--dp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
              help="Operating batch sizes (repeatable). Default 1, 8, 64 (CPU: 1, 4, 16).")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
              help="Context lengths (repeatable). Default 2048 (CPU: 256).")
@click.option("--name", help="Profile name.")
@click.option("--from-server", "server_url", metavar="URL",
              help="Read the served model (its local config.json) and engine from a running server.")
def init_command(gpu: str | None, model: str | None, dtypes: tuple[str, ...], drafter: str,
                 engine: str | None, tp: int, ep: int, dp: int, batches: tuple[int, ...],
                 contexts: tuple[int, ...], name: str | None, server_url: str | None) -> None:
    """Write a starting deployment profile (commented YAML) to stdout.

    \b
      spectune init --gpu h100-sxm --model llama-3.1-8b --drafter ngram > p.yaml
      spectune init --gpu cpu --model SNAPSHOT_DIR > p.yaml
      spectune init --gpu cpu --from-server SERVER_URL > p.yaml
    """
    from spectune.documents.user_model import parse_dtypes
    from spectune.init import profile_text, server_info

    info = server_info(server_url) if server_url else None
    if model is None and info is not None:
        if info.path is None:
            raise InputError(f"--from-server: the server serves {info.name!r} from a path spectune "
                             "cannot read here; give --model NAME|config.json|folder")
        model = info.path
    if gpu is None or model is None:
        raise InputError("give --gpu and --model (or --from-server URL for the model)")
    cpu = gpu.lower() in ("cpu", "x86-cpu", "vllm-cpu")
    click.echo(profile_text(gpu=gpu, model=model, drafter=drafter,
                            engine=engine or (info.engine if info else "vllm"), tp=tp, ep=ep, dp=dp,
                            batches=batches or ((1, 4, 16) if cpu else (1, 8, 64)),
                            contexts=contexts or ((256,) if cpu else (2048,)), name=name,
                            server=info, dtypes=parse_dtypes(dtypes)), nl=False)


# --------------------------------------------------------------------------- calibrate
@cli.command("calibrate")
@click.argument("observations", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--profile", required=True,
              help="Deployment profile whose engine constants are fitted (file, '-' or shipped example).")
@output_option()
def calibrate_command(observations: tuple[str, ...], profile: str, fmt: str) -> None:
    """Fit PROFILE's engine constants to the step times of observed windows.

    OBSERVATIONS are `spectune observe -o yaml` files of the same server: with speculation
    off and on, at one or more concurrencies (more windows identify more constants). Prints
    each constant with its value and standard error, or 'not identifiable from these windows
    (default kept)', and every window's measured and predicted step time.

    \b
      spectune calibrate OBS_OFF.yaml OBS_ON.yaml --profile PROFILE.yaml -o yaml > calib.yaml
      spectune recommend PROFILE.yaml --calibration calib.yaml
    """
    from spectune.api import calibrate as run

    doc = run(profile, list(observations))
    notes(doc["notes"])
    emit(doc, fmt)


# --------------------------------------------------------------------------- schema
@cli.command("schema")
@click.argument("kind", required=False)
def schema_command(kind: str | None) -> None:
    """Print the JSON Schema (draft 2020-12) of a document KIND; without KIND, list kinds.

    Every -o yaml|json output is a versioned envelope (apiVersion: spectune/v1, kind: ...)
    documented field by field in `spectune docs schema`. `spectune schema Profile` is the
    deployment profile you write: validate one in your editor or CI before spectune reads it.
    """
    import json

    from spectune.documents.schema import kinds, schema_for

    if kind is None:
        table = kinds()
        width = max(len(k) for k in table)
        for k, where in table.items():
            click.echo(f"{k:<{width}}  {where}")
        return
    click.echo(json.dumps(schema_for(kind), indent=2))


# --------------------------------------------------------------------------- docs, completion
@cli.command("docs")
@click.argument("name", required=False, shell_complete=_completer("docs"))
def docs_command(name: str | None) -> None:
    """Print a document shipped with spectune (markdown); without NAME, list them.

    \b
    Example:
      spectune docs schema      # every field of every -o yaml|json document, with units
    """
    from spectune.documents.shipped import doc_names, doc_path

    if name is None:
        for n in doc_names():
            click.echo(n)
        return
    click.echo(doc_path(name).read_text(encoding="utf-8"), nl=False)


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_command(shell: str) -> None:
    """Print the shell completion script for SHELL.

    Completes subcommands, options, and built-in GPU, model, drafter, engine and example
    names.

    \b
    bash:  eval "$(spectune completion bash)"     (add it to ~/.bashrc)
    zsh:   eval "$(spectune completion zsh)"      (add it to ~/.zshrc)
    fish:  spectune completion fish > ~/.config/fish/completions/spectune.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # click ships bash, zsh and fish
    click.echo(cls(cli, {}, "spectune", "_SPECTUNE_COMPLETE").source())


# --------------------------------------------------------------------------- observe
# Options and rendering live in spectune/cli/observe.py (issue 4); no arithmetic here.
from spectune.cli.observe import observe as _observe  # noqa: E402

cli.add_command(_observe, "observe")
from spectune.cli.fleet import fleet_command as _fleet  # noqa: E402

cli.add_command(_fleet, "fleet")
from spectune.cli.rules import rules_command as _rules  # noqa: E402

cli.add_command(_rules, "rules")


def main() -> None:
    cli(prog_name="spectune")


if __name__ == "__main__":
    main()
