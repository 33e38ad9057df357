"""Click parameter types and options shared by every command: numbers that must be finite,
``-q/--quiet``, ``--dtype``.

click's ``FloatRange`` lets ``nan`` through (NaN fails every comparison, so no bound
rejects it) and ``inf`` through an open upper bound; ``--tolerance nan`` or
``--window inf`` must be a usage error (exit 2), not a crash or a hang."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import click


class LazyChoice(click.Choice):
    """A :class:`click.Choice` whose values come from ``values()`` on first use (checking a
    value, showing help): the engines' snippet kinds load only when a command needs them."""

    def __init__(self, values: Callable[[], Sequence[str]]) -> None:
        self._values = values
        self._loaded: Sequence[str] | None = None
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        if self._loaded is None:
            self._loaded = tuple(self._values())
        return self._loaded

    @choices.setter
    def choices(self, values: Sequence[str]) -> None:
        self._loaded = tuple(values)


class KindsHelp(click.Command):
    """A command whose help lists every engine's snippet kinds where it says ``{kinds}``,
    filled from the engines when the help is shown (never when the command only runs)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.help and "{kinds}" in self.help:
            from spectune.api import emit_kinds as kinds

            table = kinds()
            width = max(map(len, table))
            line = next(x for x in self.help.splitlines() if "{kinds}" in x)
            indent = line[: len(line) - len(line.lstrip())]  # the docstring's, dedented by click
            rows = [f"  {kind:<{width}}  {what}" for kind, what in table.items()]
            self.help = self.help.replace("{kinds}", f"\n{indent}".join(rows))
        super().format_help_text(ctx, formatter)


def emit_kinds() -> tuple[str, ...]:
    """Every engine's snippet kinds (:func:`spectune.api.emit_kinds`), loaded when asked."""
    from spectune.api import emit_kinds as kinds

    return tuple(kinds())


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


QUIET_HELP = "No notes on stderr (warnings and errors still show)."


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from spectune.base.notes import set_quiet

        set_quiet(True)


def add_quiet(cmd: click.Command, *, recurse: bool = True) -> None:
    """Give ``cmd`` and every subcommand ``-q/--quiet`` with one meaning everywhere: no notes
    on stderr (:mod:`spectune.base.notes`). A command that declares its own keeps it (observe's
    also turns its progress bar off)."""
    if not any(p.name == "quiet" for p in cmd.params):
        cmd.params.append(click.Option(["-q", "--quiet"], is_flag=True, expose_value=False,
                                       is_eager=True, callback=_set_quiet, help=QUIET_HELP))
    if recurse:  # (the main group's commands get it as they load: spectune.cli.main.LazyCommands)
        for sub in getattr(cmd, "commands", {}).values():
            add_quiet(sub)


# --dtype KEY=DTYPE: wherever a model is taken (cost, speedup, init); spectune.documents.user_model reads it.
DTYPE_OPTION = click.option(
    "--dtype", "dtypes", multiple=True, metavar="KEY=DTYPE",
    help="Storage dtype over the model's own (repeatable): weights, experts, kv_cache, lm_head or "
         "activations = fp8, bf16, int4, ... e.g. --dtype weights=fp8 --dtype kv_cache=fp8.")


def lengths_options(fn: Any) -> Any:
    """``--prompt-tokens N --output-tokens N`` (mean tokens per request, together): the steps
    of an aggregated worker also carry the prefill that arrives per step (spectune.core.lengths,
    spectune.core.cost.prefill). On cost, speedup, recommend, emit, check and report."""
    from spectune.base.limits import MAX_CONTEXT

    for opt in reversed((
        click.option("--prompt-tokens", type=FiniteFloatRange(1, MAX_CONTEXT),
                     help="Mean prompt tokens per request (with --output-tokens): steps carry the "
                          "prefill arriving per step, which speculation does not speed up."),
        click.option("--output-tokens", type=FiniteFloatRange(1, MAX_CONTEXT),
                     help="Mean output (generation) tokens per request (with --prompt-tokens)."),
    )):
        fn = opt(fn)
    return fn


class Duration(click.ParamType):
    """Seconds from ``90``, ``20s``, ``5m``, ``1h`` (Prometheus' duration units):
    :func:`spectune.api.window_seconds`."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        from spectune.api import window_seconds
        from spectune.base.errors import ObserveUsageError

        try:
            return window_seconds(value)
        except ObserveUsageError as err:
            self.fail(err.message, param, ctx)


DURATION = Duration()
