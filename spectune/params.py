"""Click parameter types shared by every command: numbers that must be finite.

click's ``FloatRange`` lets ``nan`` through (NaN fails every comparison, so no bound
rejects it) and ``inf`` through an open upper bound; ``--tolerance nan`` or
``--window inf`` must be a usage error (exit 2), not a crash or a hang."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv
