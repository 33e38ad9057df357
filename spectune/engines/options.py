"""What every engine module shares to read a serving configuration back: the
:class:`Configured` record it fills in, and the option parsing every launcher's argument
list needs (option/value pairs, whole numbers and draft lengths with file:line errors,
JSON values, store_true flags).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from spectune.emit.plan import Range, lookup
from spectune.errors import InputError
from spectune.inputs import short
from spectune.limits import MAX_GAMMA

GAMMA_LIMIT = MAX_GAMMA  # largest draft length evaluated (as `recommend --gamma-max` and profiles' gamma_max)

Option = tuple[str, Any, int | None]  # (option, value, line)


@dataclass
class Configured:
    """The speculation a serving configuration sets up, as the engine would read it."""

    engine: str  # a key of spectune.engines.ENGINES: "vllm" or "sglang"
    form: str  # "vllm-config-file", "command-line" or "kubernetes"
    file: str
    line: int | None = None
    method: str | None = None  # the engine's own name; None = speculation off
    model: str | None = None  # drafter weights as configured
    gamma: int = 0  # vLLM num_speculative_tokens / SGLang draft steps
    schedule: list[Range] | None = None  # per-batch-size ranges, as configured
    schedule_active: bool = False  # False when the engine ignores the schedule
    data_parallel: int = 1
    prompt_lookup: tuple[int | None, int | None] = (None, None)  # vLLM ngram (min, max)
    sglang: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    served_model: str | None = None  # the target model as configured (HF id or path); None: not stated
    tensor_parallel: int = 1
    expert_parallel: bool = False  # vLLM --enable-expert-parallel / SGLang --ep-size > 1
    schedule_capped: bool = False  # the engine clamps the schedule to ``gamma`` (vLLM)
    quantization: str | None = None  # --quantization as configured (None: not stated)
    kv_cache_dtype: str | None = None  # --kv-cache-dtype as configured (None: not stated)

    @property
    def speculate(self) -> bool:
        return self.method is not None and (self.gamma > 0 or self.schedule_active)

    def gamma_at(self, batch: int) -> int:
        """Draft length the engine runs at ``batch`` concurrent sequences."""
        if not self.speculate:
            return 0
        if self.schedule and self.schedule_active:
            return lookup(self.schedule, batch, self.gamma if self.schedule_capped else None)
        return self.gamma

    def max_gamma(self, batches: Sequence[int]) -> int:
        return max((self.gamma_at(int(b)) for b in batches), default=0)


def split_options(args: list[str]) -> Iterator[tuple[str | None, str | None]]:
    """(option, value) pairs; (None, word) for a positional; value None for a flag."""
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", a):
            if "=" in a and a.startswith("--"):
                opt, val = a.split("=", 1)
                yield opt, val
                i += 1
                continue
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and not (nxt.startswith("-") and len(nxt) > 1
                                        and not re.fullmatch(r"-\d+(\.\d+)?", nxt)):
                yield a, nxt
                i += 2
            else:
                yield a, None
                i += 1
        else:
            yield None, a
            i += 1


def json_value(raw: str, what: str, file: str, line: int | None) -> Any:
    """``raw`` parsed as JSON; InputError (exit 2) naming ``what``, file and line otherwise."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {short(raw, 80)}",
                         file, line) from None
    except (RecursionError, ValueError):  # nested too deeply; an integer of > 4300 digits
        raise InputError(f"{what} is not JSON spectune reads (nested too deeply or a number too long): "
                         f"{short(raw, 80)}", file, line) from None


FALSE = ("false", "0", "no", "off")


def flag_on(val: Any) -> bool:
    """A store_true option as written: a bare flag, or a config file's true/false."""
    return val is None or val is True or (isinstance(val, str) and val.lower() not in FALSE)


def whole_number(val: Any, what: str, file: str, line: int | None, lo: int | None = None,
                 hi: int | None = None, why: str = "") -> int:
    """``val`` as a whole number in ``lo..hi``; InputError (exit 2) naming file, line and
    ``what`` (the option) otherwise. ``why`` explains the bounds."""
    try:
        if isinstance(val, bool):
            raise ValueError
        f = float(val)
        if not math.isfinite(f) or int(f) != f:
            raise ValueError
        n = int(f)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{what} must be a whole number, got {val!r}", file, line) from None
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        bounds = (f"from {lo} to {hi}" if lo is not None and hi is not None
                  else f">= {lo}" if lo is not None else f"<= {hi}")
        raise InputError(f"{what} must be {bounds}, got {val!r}" + (f" ({why})" if why else ""),
                         file, line)
    return n


def draft_length(val: Any, what: str, file: str, line: int | None, lo: int = 0) -> int:
    """A draft length: a whole number in ``lo..GAMMA_LIMIT`` (the range of --gamma-max)."""
    return whole_number(val, what, file, line, lo, GAMMA_LIMIT,
                        f"spectune evaluates draft lengths up to {GAMMA_LIMIT}, like --gamma-max")
