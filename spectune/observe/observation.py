"""The ``Observation`` document: what ``spectune observe`` measured, loadable back.

Schema (``apiVersion: spectune/v1``, ``kind: Observation``, ``schema: 1``); keys in this order.
Counts are tokens or drafts over the window; times are ISO 8601 UTC; durations in seconds.

.. code-block:: yaml

    apiVersion: spectune/v1
    kind: Observation
    schema: 1                      # bumped on any incompatible change; loaders refuse others
    engine: {name: vllm, version: 0.32.0, metrics: "vllm:spec_decode_* counters (V1)"}
    model_name: tiny-llama         # null when the server does not label it
    source: {kind: metrics, where: http://127.0.0.1:8000/metrics}   # kind: metrics | log | prometheus
    window: {start: ..., end: ..., seconds: 60.0, interval_seconds: 5.0, samples: 13,
             failed_samples: 0}
    speculation:
      drafts: 96                   # verify passes that carried >= 1 draft token (null: unknown)
      draft_tokens: 232
      accepted_tokens: 128
      num_speculative_tokens: 3    # K: positions the server reports
      mean_draft_length: 2.417     # draft_tokens / drafts (< K: some drafts were short)
      mean_acceptance_length: 2.333   # 1 + accepted_tokens / drafts (tokens per verify)
      draft_acceptance_rate: 0.5517   # accepted_tokens / draft_tokens
      per_position:                # null when the engine reports no per-position data
        accepted: [64, 40, 24]     # tokens accepted at position i (1-based order)
        marginal: [0.667, 0.417, 0.25]   # accepted_i / drafts, as vLLM reports it
        conditional: [0.667, 0.625, 0.6] # a_i = accepted_i / accepted_{i-1}
      per_position_note: null      # says why per_position is missing
      basis: one segment (no counter reset)
    segments:                      # one per stretch without a counter reset
      - {start, end, seconds, samples, drafts, draft_tokens, accepted_tokens, reset_before}
    operating_point:
      running: {samples: 13, mean: 3.2, distribution: [{running: 0, samples: 2}, ...]}
      prompt_tokens: {count: 4, sum: 68, mean: 17.0, buckets: [{le: 20.0, count: 4}, ...]}
      generation_tokens: {...}     # requests that finished in the window
      iteration_tokens: {...}      # tokens per engine step
      inter_token_latency_seconds: {...}
      note: null                   # says what is unknown
    acceptance:                    # what `recommend --observed` uses; null: speculation off
      kind: per-position           # or mean-length (SGLang, vLLM V0: i.i.d. alpha)
      conditional: [0.667, 0.625, 0.6]
      source: "vllm ... 96 drafts"
    notes: [...]
    labels: {model_name: ..., deployment: ...}   # only from `observe --prometheus`: the group
    steps:                         # engine step timing (vLLM /metrics; null for logs, SGLang)
      engine_steps: 132            # vllm:iteration_tokens_total count
      tokens_per_step: 2.45        # its mean (prompt + generated tokens per step)
      sequence_steps: 128          # decode steps summed over requests (inter-token latency count)
      sequences_per_step: 0.97     # sequence_steps / engine_steps: the batch of a decode step
      step_seconds: 0.0016         # inter-token latency mean: one decode step as requests see it
      decode_seconds: 0.206        # inter-token latency sum: request-seconds spent decoding
      mean_running: 0.85           # Little's law: decode_seconds / window seconds
      mean_running_basis: "..."    # how mean_running was found
      gauge_mean_running: 1.2      # vllm:num_requests_running over the samples (cross-check)
      decode_context_tokens: 81    # prompt + half the generation: the mean context while decoding
      verify_width: 2.81           # 1 + draft tokens / sequence_steps: tokens verified per sequence
      draft_fraction: 0.75         # drafts / sequence_steps: share of sequence steps with a draft
      generated_tokens: 256        # vllm:generation_tokens_total delta
      time_per_output_token_seconds: {...}   # histogram deltas, requests finished in the window
      decode_time_seconds: {...}
    speculative_config: {method: ngram, num_speculative_tokens: 3}  # as given (--speculative-config)

``steps`` and ``speculative_config`` are optional on load (documents written before they
existed read back with them null). Histogram ``buckets`` are cumulative counts of the
window's observations with upper bound ``le``; the +Inf bucket is left out (it equals
``count``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spectune.acceptance import Acceptance
from spectune.envelope import API_VERSION, envelope
from spectune.limits import MAX_BATCH, MAX_CONTEXT, MAX_COUNT, MAX_POINTS, MAX_POSITIONS
from spectune.observe.faults import BadBodyFault, ObserveError, ObserveUsageError

KIND = "Observation"
SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- parts
@dataclass(frozen=True)
class EngineInfo:
    """``name`` vllm | sglang; ``version`` when the server shows it; ``metrics`` names the
    metric family the numbers come from."""

    name: str
    version: str | None
    metrics: str


@dataclass(frozen=True)
class Source:
    """``kind`` metrics | log; ``where`` the URL (credentials removed) or file path."""

    kind: str
    where: str


@dataclass(frozen=True)
class Window:
    """The observed window: ISO 8601 UTC ``start``/``end`` (None when unknown, e.g. logs),
    ``seconds`` covered, scrape ``interval_seconds``, ``samples`` taken, ``failed_samples``."""

    start: str | None
    end: str | None
    seconds: float | None
    interval_seconds: float | None
    samples: int
    failed_samples: int = 0


@dataclass(frozen=True)
class PerPosition:
    """Per draft position i = 1..K: ``accepted`` tokens, ``marginal`` = accepted_i / drafts
    (vLLM's per-position acceptance rate), ``conditional`` a_i = accepted_i / accepted_{i-1}."""

    accepted: tuple[float, ...]
    marginal: tuple[float, ...]
    conditional: tuple[float, ...]


@dataclass(frozen=True)
class Speculation:
    """Speculative-decoding totals over the window (tokens, drafts) and the rates derived
    from them; None where the engine does not report a quantity."""

    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    num_speculative_tokens: int | None
    mean_draft_length: float | None
    mean_acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position: PerPosition | None
    per_position_note: str | None
    basis: str


@dataclass(frozen=True)
class SegmentInfo:
    """One stretch of the window without a counter reset, with its own deltas."""

    start: str
    end: str
    seconds: float
    samples: int
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    reset_before: str | None


@dataclass(frozen=True)
class Distribution:
    """Requests running at each sample: ``values`` = ((running, number of samples), ...)."""

    samples: int
    mean: float | None
    values: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class HistogramSummary:
    """A histogram's window delta: ``count`` observations, their ``sum`` and ``mean`` (in the
    metric's unit: tokens or seconds), cumulative ``buckets`` ((le, count), ...) without +Inf."""

    count: float
    sum: float
    mean: float | None
    buckets: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class OperatingPoint:
    """Where the server ran during the window; ``note`` says what is unknown."""

    running: Distribution | None = None
    prompt_tokens: HistogramSummary | None = None
    generation_tokens: HistogramSummary | None = None
    iteration_tokens: HistogramSummary | None = None
    inter_token_latency_seconds: HistogramSummary | None = None
    note: str | None = None


@dataclass(frozen=True)
class StepTiming:
    """Engine step timing over the window (vLLM V1 /metrics), for calibration.

    ``engine_steps``: engine iterations (``vllm:iteration_tokens_total`` count);
    ``tokens_per_step``: their mean tokens (prompt + generated); ``sequence_steps``: decode
    steps summed over requests (one inter-token latency each); ``sequences_per_step`` =
    sequence_steps / engine_steps; ``step_seconds``: mean inter-token latency (seconds, one
    decode step as a request sees it); ``decode_seconds``: sum of inter-token latencies
    (request-seconds in decode); ``mean_running``: requests in decode by Little's law,
    decode_seconds / window seconds; ``gauge_mean_running``: the sampled
    ``vllm:num_requests_running`` mean (a cross-check: 5-second samples of a gauge miss
    short requests); ``decode_context_tokens``: mean prompt + half the mean generation
    (tokens in the KV cache on average while decoding); ``verify_width``: 1 + draft tokens
    per sequence step (tokens verified per sequence per step; 1 without speculation);
    ``draft_fraction``: drafts / sequence steps (n-gram proposes nothing when no match);
    ``generated_tokens``: the window's generated tokens."""

    engine_steps: float | None
    tokens_per_step: float | None
    sequence_steps: float | None
    sequences_per_step: float | None
    step_seconds: float | None
    decode_seconds: float | None
    mean_running: float | None
    mean_running_basis: str
    gauge_mean_running: float | None
    decode_context_tokens: float | None
    verify_width: float | None
    draft_fraction: float | None
    generated_tokens: float | None
    time_per_output_token_seconds: HistogramSummary | None = None
    decode_time_seconds: HistogramSummary | None = None


#: Numeric fields of :class:`StepTiming`, in document order (histograms and basis apart).
STEP_NUMBERS = ("engine_steps", "tokens_per_step", "sequence_steps", "sequences_per_step",
                "step_seconds", "decode_seconds", "mean_running")
STEP_NUMBERS_2 = ("gauge_mean_running", "decode_context_tokens", "verify_width", "draft_fraction",
                  "generated_tokens")


@dataclass(frozen=True)
class AcceptanceInfo:
    """The acceptance handed to ``recommend``: conditional rates a_1..a_K and their source.
    ``kind`` per-position (measured per position) or mean-length (i.i.d. alpha)."""

    kind: str
    conditional: tuple[float, ...]
    source: str


@dataclass(frozen=True)
class Observation:
    """Everything ``spectune observe`` measured over one window (or one log)."""

    engine: EngineInfo
    model_name: str | None
    source: Source
    window: Window
    speculation: Speculation
    segments: tuple[SegmentInfo, ...]
    operating_point: OperatingPoint
    acceptance: AcceptanceInfo | None
    notes: tuple[str, ...] = ()
    #: the group's labels when the observation comes from Prometheus (``observe --prometheus``):
    #: model_name and the ``--by`` labels; empty for one server or a log
    labels: dict[str, str] = field(default_factory=dict)
    steps: StepTiming | None = None
    speculative_config: dict[str, Any] | None = None

    @property
    def speculative(self) -> bool:
        """Whether speculation ran in the window (False: a plain-decode window)."""
        return self.acceptance is not None

    def to_dict(self) -> dict[str, Any]:
        return observation_to_dict(self)

    @classmethod
    def from_dict(cls, doc: Any, where: str = "observation") -> Observation:
        return observation_from_dict(doc, where)

    def to_acceptance(self) -> Acceptance:
        if self.acceptance is None:
            raise ObserveUsageError(
                f"the observation of {self.source.where} is a plain-decode window (speculation "
                "off): it has no acceptance; use it with `spectune calibrate`")
        return Acceptance(tuple(self.acceptance.conditional), self.acceptance.source)


# --------------------------------------------------------------------------- helpers
def iso(t: float | None) -> str | None:
    """Unix seconds → ISO 8601 UTC with milliseconds (``2026-11-23T08:41:02.123Z``)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def num(x: float | None, digits: int = 6) -> int | float | None:
    """A count as int when whole, else a float rounded to ``digits`` significant decimals."""
    if x is None:
        return None
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if float(x).is_integer():
        return int(x)
    return round(float(x), digits)


def per_position(accepted: tuple[float, ...], drafts: float) -> PerPosition:
    """Marginal and conditional per-position rates from accepted counts per position."""
    marg = tuple(a / drafts if drafts > 0 else 0.0 for a in accepted)
    cond = Acceptance.from_marginal(marg).rates if marg else ()
    return PerPosition(tuple(accepted), marg, tuple(cond))


def speculation(drafts: float, draft_tokens: float, accepted: float, accepted_per_pos: tuple[float, ...],
                k: int | None, basis: str) -> Speculation:
    """Totals and derived rates of a window with per-position counts (vLLM V1, vLLM logs)."""
    pp = per_position(accepted_per_pos, drafts) if accepted_per_pos else None
    return Speculation(
        drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
        num_speculative_tokens=k if k is not None else (len(accepted_per_pos) or None),
        mean_draft_length=draft_tokens / drafts if drafts > 0 else None,
        mean_acceptance_length=1.0 + accepted / drafts if drafts > 0 else None,
        draft_acceptance_rate=accepted / draft_tokens if draft_tokens > 0 else None,
        per_position=pp, per_position_note=None if pp else "the server reports no per-position counts",
        basis=basis)


def histogram_summary(h: Any) -> HistogramSummary | None:
    """From a :class:`spectune.observe.window.HistogramDelta` (None stays None)."""
    if h is None:
        return None
    buckets = tuple((le, c) for le, c in h.buckets if not math.isinf(le))
    return HistogramSummary(h.count, h.sum, h.mean, buckets)


def distribution(values: list[float]) -> Distribution | None:
    """Distribution of running-request counts over samples."""
    if not values:
        return None
    bad = [v for v in values if not 0 <= v <= MAX_BATCH]  # NaN fails too
    if bad:
        raise BadBodyFault(f"the server reports {bad[0]:g} running requests; a count from 0 to "
                           f"{MAX_BATCH:,} was expected")
    ints = [round(v) for v in values]
    counts: dict[int, int] = {}
    for v in ints:
        counts[v] = counts.get(v, 0) + 1
    return Distribution(len(ints), sum(ints) / len(ints), tuple(sorted(counts.items())))


# --------------------------------------------------------------------------- to dict
def _hist(h: HistogramSummary | None) -> dict[str, Any] | None:
    if h is None:
        return None
    return {"count": num(h.count), "sum": num(h.sum), "mean": num(h.mean),
            "buckets": [{"le": num(le), "count": num(c)} for le, c in h.buckets]}


def observation_to_dict(o: Observation) -> dict[str, Any]:
    """The versioned document (``envelope``), keys in schema order."""
    s = o.speculation
    pp = s.per_position
    op = o.operating_point
    run = op.running
    return envelope(KIND, {
        "schema": SCHEMA_VERSION,
        "engine": {"name": o.engine.name, "version": o.engine.version, "metrics": o.engine.metrics},
        "model_name": o.model_name,
        "source": {"kind": o.source.kind, "where": o.source.where},
        "window": {"start": o.window.start, "end": o.window.end, "seconds": num(o.window.seconds, 3),
                   "interval_seconds": num(o.window.interval_seconds, 3), "samples": o.window.samples,
                   "failed_samples": o.window.failed_samples},
        "speculation": {
            "drafts": num(s.drafts), "draft_tokens": num(s.draft_tokens),
            "accepted_tokens": num(s.accepted_tokens),
            "num_speculative_tokens": s.num_speculative_tokens,
            "mean_draft_length": num(s.mean_draft_length),
            "mean_acceptance_length": num(s.mean_acceptance_length),
            "draft_acceptance_rate": num(s.draft_acceptance_rate),
            "per_position": None if pp is None else {
                "accepted": [num(a) for a in pp.accepted],
                "marginal": [num(m) for m in pp.marginal],
                "conditional": [num(c) for c in pp.conditional]},
            "per_position_note": s.per_position_note,
            "basis": s.basis,
        },
        "segments": [{"start": g.start, "end": g.end, "seconds": num(g.seconds, 3), "samples": g.samples,
                      "drafts": num(g.drafts), "draft_tokens": num(g.draft_tokens),
                      "accepted_tokens": num(g.accepted_tokens), "reset_before": g.reset_before}
                     for g in o.segments],
        "operating_point": {
            "running": None if run is None else {
                "samples": run.samples, "mean": num(run.mean),
                "distribution": [{"running": v, "samples": n} for v, n in run.values]},
            "prompt_tokens": _hist(op.prompt_tokens),
            "generation_tokens": _hist(op.generation_tokens),
            "iteration_tokens": _hist(op.iteration_tokens),
            "inter_token_latency_seconds": _hist(op.inter_token_latency_seconds),
            "note": op.note,
        },
        "acceptance": None if o.acceptance is None else {
            "kind": o.acceptance.kind,
            "conditional": [num(c) for c in o.acceptance.conditional],
            "source": o.acceptance.source},
        "notes": list(o.notes),
        **({"labels": dict(o.labels)} if o.labels else {}),
        "steps": _steps(o.steps),
        "speculative_config": o.speculative_config,
    })


def _steps(t: StepTiming | None) -> dict[str, Any] | None:
    if t is None:
        return None
    out: dict[str, Any] = {k: num(getattr(t, k)) for k in STEP_NUMBERS}
    out["mean_running_basis"] = t.mean_running_basis
    out.update({k: num(getattr(t, k)) for k in STEP_NUMBERS_2})
    out["time_per_output_token_seconds"] = _hist(t.time_per_output_token_seconds)
    out["decode_time_seconds"] = _hist(t.decode_time_seconds)
    return out


# --------------------------------------------------------------------------- from dict
#: The largest magnitude a loaded number may have: counts, tokens and seconds beyond 2**53
#: are not exact as floats and would overflow later arithmetic (batch sizes are int64).
MAX_NUMBER = MAX_COUNT


class _Reader:
    """Typed, bounded access to a loaded document with ``file: key.path`` in every error.

    Numbers must be finite and at most :data:`MAX_NUMBER` in magnitude, and not negative
    unless ``lo`` says otherwise; integers must be whole; lists must be lists."""

    def __init__(self, where: str, lines: dict[str, int] | None = None) -> None:
        self.where = where
        self.lines = lines or {}

    def fail(self, path: str, msg: str) -> ObserveUsageError:
        """``file:line: key.path: msg``; the line of the nearest enclosing key that has one."""
        at = path
        while at and at not in self.lines:
            at = at.rsplit("[", 1)[0] if at.endswith("]") else at.rpartition(".")[0]
        line = self.lines.get(at)
        return ObserveUsageError(f"{self.where}{f':{line}' if line else ''}: {path}: {msg}")

    @staticmethod
    def _at(path: str, k: str) -> str:
        return f"{path}.{k}" if path else k

    def map(self, d: Any, path: str) -> dict[str, Any]:
        if not isinstance(d, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(d)}")
        return d

    def key(self, d: dict[str, Any], k: str, path: str) -> Any:
        if k not in d:
            raise self.fail(self._at(path, k), "missing")
        return d[k]

    def list(self, d: dict[str, Any], k: str, path: str) -> list[Any]:
        v = self.key(d, k, path)
        if not isinstance(v, list):
            raise self.fail(self._at(path, k), f"expected a list, got {_kind(v)}")
        return v

    def _number(self, v: Any, path: str, lo: float | None) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(path, f"expected a number, got {_kind(v)}")
        x = float(v) if abs(v) <= MAX_NUMBER else math.inf  # a huge int would overflow float()
        if not math.isfinite(x) or abs(x) > MAX_NUMBER:
            raise self.fail(path, f"expected a finite number of magnitude at most 2**53, got {v!r}")
        if lo is not None and x < lo:
            raise self.fail(path, f"expected a number >= {lo:g}, got {v!r}")
        return x

    def opt_num(self, d: dict[str, Any], k: str, path: str, lo: float | None = 0.0) -> float | None:
        v = self.key(d, k, path)
        return None if v is None else self._number(v, self._at(path, k), lo)

    def numv(self, d: dict[str, Any], k: str, path: str, lo: float | None = 0.0) -> float:
        v = self.opt_num(d, k, path, lo)
        if v is None:
            raise self.fail(self._at(path, k), "expected a number, got null")
        return v

    def opt_int(self, d: dict[str, Any], k: str, path: str, lo: int = 0) -> int | None:
        x = self.opt_num(d, k, path, lo)
        if x is None:
            return None
        if not x.is_integer():
            raise self.fail(self._at(path, k), f"expected a whole number, got {d[k]!r}")
        return int(x)

    def integer(self, d: dict[str, Any], k: str, path: str, lo: int = 0) -> int:
        v = self.opt_int(d, k, path, lo)
        if v is None:
            raise self.fail(self._at(path, k), "expected a whole number, got null")
        return v

    def opt_str(self, d: dict[str, Any], k: str, path: str) -> str | None:
        v = self.key(d, k, path)
        if v is None:
            return None
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise self.fail(self._at(path, k), f"expected text, got {_kind(v)}")
        return str(v)

    def string(self, d: dict[str, Any], k: str, path: str) -> str:
        v = self.opt_str(d, k, path)
        if v is None:
            raise self.fail(self._at(path, k), "expected text, got null")
        return v

    def nums(self, d: dict[str, Any], k: str, path: str, hi: float | None = None) -> tuple[float, ...]:
        p = self._at(path, k)
        out = tuple(self._number(x, f"{p}[{i}]", 0.0) for i, x in enumerate(self.list(d, k, path)))
        if hi is not None and any(x > hi for x in out):
            raise self.fail(p, f"expected numbers in [0, {hi:g}]")
        return out

    def hist(self, d: dict[str, Any], k: str, path: str) -> HistogramSummary | None:
        v = self.key(d, k, path)
        if v is None:
            return None
        p = self._at(path, k)
        h = self.map(v, p)
        buckets = []
        for i, b in enumerate(self.list(h, "buckets", p)):
            bp = f"{p}.buckets[{i}]"
            bm = self.map(b, bp)
            buckets.append((self.numv(bm, "le", bp, lo=None), self.numv(bm, "count", bp)))
        return HistogramSummary(self.numv(h, "count", p), self.numv(h, "sum", p),
                                self.opt_num(h, "mean", p), tuple(buckets))


def _kind(v: Any) -> str:
    """A value's kind for messages, without echoing a whole (possibly huge) structure."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({str(v).lower()})"
    if isinstance(v, (int, float, str)):
        text = repr(v)
        return text if len(text) <= 40 else text[:37] + "..."
    return {"dict": "a mapping", "list": "a list"}.get(type(v).__name__, type(v).__name__)


def _key_lines(node: Any, path: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """The line of every key path (``a.b[0].c``) of a YAML node, for error messages."""
    import yaml

    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            sub = f"{path}.{k.value}" if path else str(k.value)
            out[sub] = k.start_mark.line + 1
            _key_lines(v, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[f"{path}[{i}]"] = v.start_mark.line + 1
            _key_lines(v, f"{path}[{i}]", out)
    return out


def observation_from_dict(doc: Any, where: str = "observation",
                          lines: dict[str, int] | None = None) -> Observation:
    """Rebuild an :class:`Observation` from its document; errors name ``where``, the line
    (``lines``: key path -> line, when the document came from YAML) and the key."""
    r = _Reader(where, lines)
    d = r.map(doc, "(top)")
    if d.get("apiVersion") != API_VERSION:
        raise r.fail("apiVersion", f"expected {API_VERSION!r}, got {d.get('apiVersion')!r}")
    if d.get("kind") != KIND:
        raise r.fail("kind", f"expected {KIND!r}, got {d.get('kind')!r} (make one with "
                             "`spectune observe URL -o yaml`)")
    if d.get("schema") != SCHEMA_VERSION:
        raise r.fail("schema", f"this spectune reads Observation schema {SCHEMA_VERSION}, "
                               f"got {d.get('schema')!r}")
    e = r.map(r.key(d, "engine", ""), "engine")
    src = r.map(r.key(d, "source", ""), "source")
    w = r.map(r.key(d, "window", ""), "window")
    s = r.map(r.key(d, "speculation", ""), "speculation")
    ppd = r.key(s, "per_position", "speculation")
    pp = None
    if ppd is not None:
        p = "speculation.per_position"
        ppm = r.map(ppd, p)
        pp = PerPosition(r.nums(ppm, "accepted", p), r.nums(ppm, "marginal", p, hi=1.0),
                         r.nums(ppm, "conditional", p, hi=1.0))
        if not len(pp.accepted) == len(pp.marginal) == len(pp.conditional):
            raise r.fail(p, "accepted, marginal and conditional must have one entry per position each")
    segs = []
    for i, g in enumerate(r.list(d, "segments", "")):
        p = f"segments[{i}]"
        gm = r.map(g, p)
        segs.append(SegmentInfo(r.string(gm, "start", p), r.string(gm, "end", p), r.numv(gm, "seconds", p),
                                r.integer(gm, "samples", p), r.opt_num(gm, "drafts", p),
                                r.opt_num(gm, "draft_tokens", p), r.opt_num(gm, "accepted_tokens", p),
                                r.opt_str(gm, "reset_before", p)))
    opd = r.map(r.key(d, "operating_point", ""), "operating_point")
    rund = r.key(opd, "running", "operating_point")
    run = None
    if rund is not None:
        rp = "operating_point.running"
        rm = r.map(rund, rp)
        vals = []
        for i, x in enumerate(r.list(rm, "distribution", rp)):
            p = f"{rp}.distribution[{i}]"
            xm = r.map(x, p)
            vals.append((r.integer(xm, "running", p), r.integer(xm, "samples", p, lo=1)))
        run = Distribution(r.integer(rm, "samples", rp), r.opt_num(rm, "mean", rp), tuple(vals))
        if len({v for v, _ in vals}) < len(vals):
            raise r.fail(f"{rp}.distribution", "a running-request count appears twice")
        if sum(n for _, n in vals) != run.samples:
            raise r.fail(f"{rp}.samples", f"{run.samples}, but the distribution counts "
                                          f"{sum(n for _, n in vals)} samples")
    op = OperatingPoint(run, r.hist(opd, "prompt_tokens", "operating_point"),
                        r.hist(opd, "generation_tokens", "operating_point"),
                        r.hist(opd, "iteration_tokens", "operating_point"),
                        r.hist(opd, "inter_token_latency_seconds", "operating_point"),
                        r.opt_str(opd, "note", "operating_point"))
    if run is not None and len(run.values) > MAX_POINTS:
        raise r.fail("operating_point.running.distribution",
                     f"{len(run.values):,} distinct running-request counts; at most {MAX_POINTS:,}")
    if run is not None and any(v > MAX_BATCH for v, _ in run.values):
        raise r.fail("operating_point.running.distribution",
                     f"a running-request count above {MAX_BATCH:,} (the largest batch spectune evaluates)")
    lengths = [h.mean for h in (op.prompt_tokens, op.generation_tokens)
               if h is not None and h.mean is not None]
    if sum(lengths) > MAX_CONTEXT:
        raise r.fail("operating_point", f"mean prompt + generation length {sum(lengths):g} tokens is above "
                                        f"{MAX_CONTEXT:,} (the longest context spectune evaluates)")
    acc_info = None
    if r.key(d, "acceptance", "") is not None:
        a = r.map(d["acceptance"], "acceptance")
        cond = r.nums(a, "conditional", "acceptance", hi=1.0)
        if not cond:
            raise r.fail("acceptance.conditional", "expected rates in [0, 1], at least one")
        if len(cond) > MAX_POSITIONS:
            raise r.fail("acceptance.conditional", f"{len(cond)} positions; at most {MAX_POSITIONS}")
        acc_info = AcceptanceInfo(r.string(a, "kind", "acceptance"), cond,
                                  r.string(a, "source", "acceptance"))
    steps = None
    if d.get("steps") is not None:
        sm = r.map(d["steps"], "steps")
        nums = {k: r.opt_num(sm, k, "steps") for k in (*STEP_NUMBERS, *STEP_NUMBERS_2)}
        steps = StepTiming(**nums, mean_running_basis=r.string(sm, "mean_running_basis", "steps"),
                           time_per_output_token_seconds=r.hist(sm, "time_per_output_token_seconds", "steps"),
                           decode_time_seconds=r.hist(sm, "decode_time_seconds", "steps"))
    spec_cfg = d.get("speculative_config")
    if spec_cfg is not None:
        spec_cfg = r.map(spec_cfg, "speculative_config")
    notes = r.list(d, "notes", "")
    for i, n in enumerate(notes):
        if not isinstance(n, str):
            raise r.fail(f"notes[{i}]", f"expected text, got {_kind(n)}")
    labels = r.map(d.get("labels") or {}, "labels")
    for k, v in labels.items():
        if not isinstance(v, str):
            raise r.fail(f"labels.{k}", f"expected text, got {_kind(v)}")
    return Observation(
        labels={str(k): v for k, v in labels.items()},
        engine=EngineInfo(r.string(e, "name", "engine"), r.opt_str(e, "version", "engine"),
                          r.string(e, "metrics", "engine")),
        model_name=r.opt_str(d, "model_name", ""),
        source=Source(r.string(src, "kind", "source"), r.string(src, "where", "source")),
        window=Window(r.opt_str(w, "start", "window"), r.opt_str(w, "end", "window"),
                      r.opt_num(w, "seconds", "window"), r.opt_num(w, "interval_seconds", "window"),
                      r.integer(w, "samples", "window"), r.integer(w, "failed_samples", "window")),
        speculation=Speculation(
            r.opt_num(s, "drafts", "speculation"), r.opt_num(s, "draft_tokens", "speculation"),
            r.opt_num(s, "accepted_tokens", "speculation"),
            r.opt_int(s, "num_speculative_tokens", "speculation"),
            r.opt_num(s, "mean_draft_length", "speculation"),
            r.opt_num(s, "mean_acceptance_length", "speculation"),
            r.opt_num(s, "draft_acceptance_rate", "speculation"), pp,
            r.opt_str(s, "per_position_note", "speculation"), r.string(s, "basis", "speculation")),
        segments=tuple(segs),
        operating_point=op,
        acceptance=acc_info,
        notes=tuple(notes),
        steps=steps,
        speculative_config=spec_cfg,
    )


def load_observation(path: str | Path) -> Observation:
    """Read a ``spectune observe -o yaml|json`` file (``-`` for stdin)."""
    doc, name, lines = read_document(path)
    return observation_from_dict(doc, name, lines)


def read_document(path: str | Path) -> tuple[Any, str, dict[str, int]]:
    """The parsed YAML or JSON document of ``path`` (``-`` for stdin), its name for messages
    and the line of each key path (YAML only; empty for JSON)."""
    from spectune.errors import InputError
    from spectune.inputs import read_input, yaml_document

    name = str(path)
    try:
        text = read_input(name)
    except InputError as err:
        raise ObserveUsageError(f"cannot read observation file: {err.message}") from None
    doc: Any = None
    lines: dict[str, int] = {}
    if text.lstrip().startswith("{"):
        # JSON first: YAML 1.1 reads an exponent without a dot (json's 1e-06) as text
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = None
    if doc is None:
        try:
            doc, node = yaml_document(text, name)
            lines = _key_lines(node)
        except InputError as err:
            raise ObserveUsageError(f"{err.message} (not YAML or JSON)") from None
    return doc, name, lines


def checked(obs: Observation, fault: type[ObserveError]) -> Observation:
    """``obs`` when its document loads back as ``recommend --observed`` reads it; else
    ``fault`` naming what the source reported that spectune cannot use. What ``observe``
    writes, ``recommend --observed`` accepts."""
    try:
        observation_from_dict(observation_to_dict(obs), obs.source.where)
    except ObserveUsageError as err:
        raise fault(f"{obs.source.where} reported values spectune cannot use, so no observation is "
                    f"written: {err.message.removeprefix(obs.source.where + ': ')}") from None
    return obs
