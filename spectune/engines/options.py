"""What every engine module shares to read a serving configuration back: the
:class:`Configured` record it fills in, and the option parsing every launcher's argument
list needs (option/value pairs, whole numbers and draft lengths with file:line errors,
JSON values, store_true flags, the files a configuration refers to); and the drafter checks
every engine's emitter makes before writing one (:func:`check_drafter`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError
from spectune.base.limits import MAX_CONTEXT, MAX_GAMMA
from spectune.core.deployment import Deployment
from spectune.core.plan import Range, lookup
from spectune.documents.inputs import JsonProblem, input_file_problem, parse_json, read_input, short

GAMMA_LIMIT = MAX_GAMMA  # largest draft length evaluated (as `recommend --gamma-max` and profiles' gamma_max)

Option = tuple[str, Any, int | None]  # (option, value, line)


@dataclass
class Configured:
    """The speculation a serving configuration sets up, as the engine would read it."""

    engine: str  # a key of spectune.engines.registry.ENGINES: "vllm" or "sglang"
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
    #: token budget per step as configured (vLLM --max-num-batched-tokens, SGLang
    #: --chunked-prefill-size; None: not stated or no limit) and whether chunks mix into
    #: decode steps (SGLang --enable-mixed-chunk; None: the engine's default)
    token_budget: int | None = None
    mixed_prefill: bool | None = None
    #: environment variables the launch sets, literal values only: name -> (value, line)
    #: (a shell command's ``NAME=value`` words and earlier ``export``s, a container's ``env``)
    env: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    #: the settings of the expert-parallel exchange as configured, by the option or
    #: environment variable that set them (``--all2all-backend``, ``--moe-a2a-backend``, ...):
    #: (value, line); the engine module's ``priced_exchange`` says what spectune prices
    ep_settings: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    #: SGLang --max-running-requests as configured (None: not stated)
    max_running: int | None = None
    #: requests the engine runs at once while it speculates as configured (0: no such cap;
    #: SGLang without --max-running-requests: 48), priced by spectune.core.queueing
    running_cap: int = 0

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
    """``raw`` parsed as JSON (:func:`spectune.documents.inputs.parse_json`: bounded depth and
    numbers); InputError (exit 2) naming ``what``, file and line otherwise."""
    try:
        return parse_json(raw)
    except JsonProblem as exc:
        col = exc.offset - raw.rfind("\n", 0, exc.offset)
        kind = "valid JSON" if exc.syntax else "JSON spectune reads"
        raise InputError(f"{what} is not {kind} ({exc.message} at column {col}): {short(raw, 80)}",
                         file, line) from None


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
        raise InputError(f"{what} must be a whole number, got {short(val)}", file, line) from None
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        bounds = (f"from {lo} to {hi}" if lo is not None and hi is not None
                  else f">= {lo}" if lo is not None else f"<= {hi}")
        raise InputError(f"{what} must be {bounds}, got {short(val)}" + (f" ({why})" if why else ""),
                         file, line)
    return n


def draft_length(val: Any, what: str, file: str, line: int | None, lo: int = 0) -> int:
    """A draft length: a whole number in ``lo..GAMMA_LIMIT`` (the range of --gamma-max)."""
    return whole_number(val, what, file, line, lo, GAMMA_LIMIT,
                        f"spectune evaluates draft lengths up to {GAMMA_LIMIT}, like --gamma-max")


# --------------------------------------------------------------------------- referenced files
def referenced_text(value: str, folder: Path, option: str, file: str,
                    line: int | None) -> tuple[Path, str | None]:
    """(the path looked at, its text) for ``option value`` given on ``line`` of ``file``: a
    file the configuration refers to (vLLM's ``--config FILE``, SGLang's
    ``--speculative-adaptive-config FILE``), a relative path taken from the configuration's
    ``folder``.

    One rule for both. A file that is not there gives None: the caller says so in a warning
    and checks the rest (the file may exist only inside the container, e.g. a mounted
    ConfigMap). A file that is there but cannot be read -- a device such as ``/dev/zero``, a
    directory, more than MAX_INPUT_BYTES, not UTF-8, no permission -- is an InputError (exit
    2) naming it: a verdict on settings that could not be read would be a verdict on
    something else."""
    p = Path(value) if Path(value).is_absolute() else folder / value
    problem = input_file_problem(str(p))
    if problem is None:
        return p, read_input(str(p))
    if not os.path.lexists(p):  # missing, or a name too long to be a file: never an OSError here
        return p, None
    raise InputError(f"{option} {value}: {problem}", file, line)


#: The chunked-prefill token budget options (spectune.core.cost.prefill reads the budget).
BUDGET_OPTIONS = ("--max-num-batched-tokens", "--chunked-prefill-size")


def read_budget(conf: Configured, opt: str, val: Any, line: int | None) -> bool:
    """Set ``conf.token_budget`` when ``opt`` is a budget option (True); SGLang's -1 turns
    chunking off (no budget stated)."""
    if opt not in BUDGET_OPTIONS or val is None:
        return False
    sglang = opt == "--chunked-prefill-size"
    n = whole_number(val, opt, conf.file, line, lo=-1 if sglang else 1, hi=MAX_CONTEXT)
    if n == 0:
        raise InputError(f"{opt} must be a positive whole number (SGLang: or -1, no chunking), got 0",
                         conf.file, line)
    conf.token_budget = n if n > 0 else None
    return True


def with_configured_budget(dep: Deployment, conf: Configured) -> Deployment:
    """``dep`` with the token budget and prefill mixing the configuration sets (as the
    engine would run), its engine profile's where it sets none."""
    eng = dep.engine
    budget = conf.token_budget or eng.max_num_batched_tokens
    mixed = eng.mixed_prefill if conf.mixed_prefill is None else conf.mixed_prefill
    if (budget, mixed) == (eng.max_num_batched_tokens, eng.mixed_prefill):
        return dep
    return replace(dep, engine=replace(eng, max_num_batched_tokens=budget, mixed_prefill=mixed))



def check_drafter(dep: Deployment, method: str, *, loads: str | None, chains: str | None,
                  or_else: str = "") -> None:
    """The drafter checks every engine's emitter makes before writing ``method`` (as messages
    name it: "vLLM's 'eagle3' method"). ``loads``, where the drafter's weights go when the method
    loads a model (None: it loads none), needs the profile's drafter ``path``; ``chains``, the
    engine drafting chains only as messages say it (None: trees too), refuses a tree (topk > 1),
    suggesting ``or_else`` besides a chain. InputError (exit 2) naming the profile key."""
    if loads is not None and not dep.drafter.path:
        raise InputError(f"{method} needs the drafter's weights: set 'path' (the Hugging Face id or "
                         f"directory {loads}) in the drafter profile", key="drafter.path")
    if chains is not None and dep.drafter.topk > 1:
        raise InputError(f"{chains} (this drafter is a tree, topk = {dep.drafter.topk}); describe the "
                         f"drafter with topk 1{or_else}", key="drafter.topk")


# --------------------------------------------------------------------------- expert-parallel exchange
def exchange_priced(dep: Deployment) -> bool:
    """Whether ``dep`` prices an expert-parallel exchange: a MoE model over ep > 1 GPUs
    (:mod:`spectune.core.cost.comm`); otherwise the configured backend moves nothing."""
    return dep.parallelism.ep > 1 and any(getattr(g.ffn, "n_experts", 0) for g in dep.model.layers)


def ep_setting(conf: Configured, name: str, val: Any, line: int | None, choices: Sequence[str],
               engine: str) -> None:
    """Record an exchange setting (``name`` = ``val``) in ``conf.ep_settings``; InputError
    (exit 2) naming file, line and the setting when the engine itself refuses the value
    (``choices``: what its argument parser accepts, ``engine`` names that release)."""
    value = "" if val is None else str(val).strip()
    if value not in choices:
        raise InputError(f"expected one of {', '.join(choices)} ({engine}), got {short(val)}",
                         conf.file, line, name)
    conf.ep_settings[name] = (value, line)


def unpriced_exchange(conf: Configured, name: str, why: str, priced: str) -> InputError:
    """The one-line error for a configured exchange spectune cannot price (exit 2): the
    setting, its file and line, why, and the settings it prices (``priced``, the engine's
    words for :data:`~spectune.core.deployment.EP_EXCHANGES`)."""
    value, line = conf.ep_settings[name]
    return InputError(f"{value!r}: {why}; spectune prices {priced} (or a deployment without expert "
                      "parallelism)", conf.file, line, name)
