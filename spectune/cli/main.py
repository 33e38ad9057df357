"""The ``spectune`` command group: the table of commands (each loaded only when it runs or its
help is asked), the error handling and the exit codes. The commands are one module each
beside this one; they parse options, call :mod:`spectune.api` and hand the result to
:mod:`spectune.render`.

Exit codes: :class:`spectune.base.exit_codes.ExitCode` (0 ok; 1 a ``check`` gate failed; 2 usage
or input error; 3-10 network faults of ``observe``; 70 an internal error, never 1).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, NoReturn

import click

from spectune.base.exit_codes import ExitCode
from spectune.base.version import __version__
from spectune.cli.params import QUIET_HELP, add_quiet

if TYPE_CHECKING:
    from spectune.base.errors import SpectuneError

# name -> (module under spectune.cli, its click command, the start of its help text: what
# `spectune --help` shows beside it). Only the module of the command that runs is imported
# (click's lazy-group pattern, in the group's command mapping); the help line is written here so
# that `spectune --help` imports no command (tests/test_cli_lazy.py keeps it the command's own).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "calibrate": ("setup", "calibrate_command",
                  "Fit PROFILE's engine constants to the step times of observed windows."),
    "check": ("check", "check_command",
              "Gate a deployed serving configuration against PROFILE's recommendation (for CI)."),
    "completion": ("setup", "completion_command", "Print the shell completion script for SHELL."),
    "cost": ("explain", "cost", "Cost of one forward pass per GPU, by component."),
    "docs": ("setup", "docs_command",
             "Print a document shipped with spectune (markdown); without NAME, list them."),
    "emit": ("emit", "emit_command",
             "Print the serving-engine settings for PROFILE's recommendation, and nothing else."),
    "fleet": ("fleet", "fleet_command", "Recommend gamma for every deployment of FLEET.yaml from the "
                                        "Prometheus that scrapes them: per deployment its observed"),
    "init": ("setup", "init_command", "Write a starting deployment profile (commented YAML) to stdout."),
    "observe": ("observe", "observe", "Measure speculative-decoding acceptance and the operating point of a "
                                      "running vLLM or SGLang server over a window,"),
    "profiles": ("setup", "profiles", "Built-in GPU, model, drafter and engine profiles."),
    "recommend": ("recommend", "recommend",
                  "Recommend gamma* per batch size and context length for PROFILE."),
    "report": ("report", "report_command",
               "An HTML report for PROFILE: why gamma* changes with batch size and context."),
    "rules": ("rules", "rules_command", "Print Prometheus recording and alerting rules (a rules file) for "
                                        "the vLLM / SGLang deployments of PROFILE, or"),
    "schema": ("setup", "schema_command",
               "Print the JSON Schema (draft 2020-12) of a document KIND; without KIND, list kinds."),
    "speedup": ("explain", "speedup", "Predicted speedup of one gamma."),
    "widthdepth": ("explain", "widthdepth",
                   "Spend N positions per step as width (N sequences) or as depth (speculation)?"),
}


def gate(text: str) -> str:
    """``text`` through :func:`spectune.base.redact.gate` (no credential printed) when that
    module is loaded -- every network client loads it; other commands do not pay for it."""
    redact = sys.modules.get("spectune.base.redact")
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


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands: every name of :data:`COMMANDS` is listed, but a command's module
    is imported only when the command itself is looked up (click's lazy-group pattern, kept
    in the mapping so that everything reading ``group.commands`` sees every command)."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            module, attr, _ = COMMANDS[name]
            cmd = getattr(import_module(f"spectune.cli.{module}"), attr)
            add_quiet(cmd)
            self._loaded[name] = cmd
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:  # without importing the command
        return name in COMMANDS or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*COMMANDS, *self._loaded}))

    def __len__(self) -> int:
        return len({*COMMANDS, *self._loaded})

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded


def terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` finds it ($COLUMNS, else the
    terminal of stdout, else 80), without importing shutil (with bz2, lzma and zlib: 2 ms of
    ``spectune --help``, whose goal is the cost of click alone)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class SpectuneContext(click.Context):
    """click's context, its help formatter sized by :func:`terminal_columns`."""

    def make_formatter(self) -> click.HelpFormatter:
        from click import formatting

        width = self.terminal_width or formatting.FORCED_WIDTH
        if width is None:  # click's own rule (HelpFormatter), shutil aside
            width = max(min(terminal_columns(), self.max_content_width or 80) - 2, 50)
        return self.formatter_class(width=width, max_width=self.max_content_width)


class SpectuneGroup(click.Group):
    """Loads a command's module only when that command is asked for (:class:`LazyCommands`),
    turns a user-facing error into one line on stderr and its exit code, and anything else
    that escapes a command into an internal error (exit 70)."""

    context_class = SpectuneContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list as click writes it, the help lines taken from :data:`COMMANDS`
        (cut as click cuts a command's own), so that no command is imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for n in names:
            if n in COMMANDS and not self.commands.is_loaded(n):  # type: ignore[attr-defined]
                rows.append((n, click.Command(n, help=COMMANDS[n][2]).get_short_help_str(limit)))
            else:
                rows.append((n, self.commands[n].get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's own handling, except that a usage error is one line (exit 2), an
        interrupt exits 130 and a closed stdout exits 0 -- click exits 1 for both, the code
        ``check`` keeps for a failed gate."""
        kwargs["standalone_mode"] = False
        add_quiet(self, recurse=False)  # each command gets it as it loads
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
        from spectune.base.errors import SpectuneError  # here, not at the top: `--help` never gets here

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


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``--version``, as click's version_option prints it (which imports locale: 1 ms of --help)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"spectune, version {__version__}")
        ctx.exit()


@click.group(cls=SpectuneGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit.")
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
    from spectune.base.notes import set_quiet

    set_quiet(quiet)  # each subcommand's own --quiet may still turn it on
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


def main() -> None:
    cli(prog_name="spectune")


if __name__ == "__main__":
    main()
