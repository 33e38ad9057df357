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

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spectune.base.errors import BadBodyFault, ObserveError, ObserveUsageError
from spectune.base.limits import MAX_BATCH, MAX_CONTEXT, MAX_POINTS, MAX_POSITIONS
from spectune.core.acceptance import Acceptance
from spectune.documents.docspec import (
    AnyObject,
    Choice,
    Field,
    Kind,
    List,
    Map,
    Nullable,
    Number,
    Obj,
    Reader,
    Text,
    parse_document,
)
from spectune.documents.families import engine_families

KIND = "Observation"
SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- parts
@dataclass(frozen=True)
class EngineInfo:
    """``name`` an engine's (a family); ``version`` when the server shows it; ``metrics`` the metrics read."""

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
        drafts = self.speculation.drafts if self.speculation is not None else None
        return Acceptance(tuple(self.acceptance.conditional), self.acceptance.source,
                          float(drafts) if drafts else None)


# --------------------------------------------------------------------------- helpers
def iso(t: float | None) -> str | None:
    """Unix seconds → ISO 8601 UTC with milliseconds (``2026-11-23T08:41:02.123Z``)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


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
    """From a :class:`spectune.documents.window.HistogramDelta` (None stays None)."""
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


# --------------------------------------------------------------------------- the document
def _count(decimals: int = 6, maximum: float | None = None, unit: str = "") -> Number:
    """A measured count, rate or duration: not negative; written with ``decimals``."""
    return Number(minimum=0, maximum=maximum, decimals=decimals, description=unit)


def _known(unit: str) -> Nullable:
    """A measured quantity in ``unit``; null when the source does not report it."""
    return Nullable(_count(unit=unit))


_CNT = Nullable(_count())
_RATES = List(_count(maximum=1.0))
_HIST = Nullable(Obj((
    Field("count", _count()), Field("sum", _count()), Field("mean", _CNT),
    Field("buckets", List(Obj((Field("le", Number(decimals=6)), Field("count", _count())),
                              build=lambda le, count: (le, count),
                              parts=lambda b: {"le": b[0], "count": b[1]}))),
), build=HistogramSummary, description="a histogram's window delta: count, sum, mean (in the metric's "
                                       "unit) and cumulative buckets (upper bound le; +Inf left out)"))

#: Numeric fields of :class:`StepTiming`, in document order (histograms and basis apart).
STEP_NUMBERS = ("engine_steps", "tokens_per_step", "sequence_steps", "sequences_per_step",
                "step_seconds", "decode_seconds", "mean_running")
STEP_NUMBERS_2 = ("gauge_mean_running", "decode_context_tokens", "verify_width", "draft_fraction",
                  "generated_tokens")

OBSERVATION = Kind(KIND, "spectune observe", "what was measured on a running server (or log)", Obj((
    Field("engine", Obj((Field("name", Choice(engine_families())), Field("version", Nullable(Text())),
                         Field("metrics", Text())), build=EngineInfo)),
    Field("model_name", Nullable(Text())),
    Field("source", Obj((Field("kind", Choice(("metrics", "log", "prometheus"))), Field("where", Text())),
                        build=Source)),
    Field("window", Obj((
        Field("start", Nullable(Text(description="ISO 8601 UTC"))), Field("end", Nullable(Text())),
        Field("seconds", Nullable(_count(3, unit="seconds"))),
        Field("interval_seconds", Nullable(_count(3, unit="seconds"))),
        Field("samples", Number(integer=True, minimum=0)),
        Field("failed_samples", Number(integer=True, minimum=0))), build=Window)),
    Field("speculation", Obj((
        Field("drafts", _known("verify passes with >= 1 draft token")),
        Field("draft_tokens", _known("tokens")),
        Field("accepted_tokens", _known("tokens")),
        Field("num_speculative_tokens", Nullable(Number(integer=True, minimum=0))),
        Field("mean_draft_length", _known("tokens per draft")),
        Field("mean_acceptance_length", _known("tokens per verify pass (1 + accepted / drafts)")),
        Field("draft_acceptance_rate", _known("accepted / draft tokens")),
        Field("per_position", Nullable(Obj((
            Field("accepted", List(_count())), Field("marginal", _RATES), Field("conditional", _RATES)),
            build=PerPosition))),
        Field("per_position_note", Nullable(Text())), Field("basis", Text())), build=Speculation)),
    Field("segments", List(Obj((
        Field("start", Text()), Field("end", Text()), Field("seconds", _count(3, unit="seconds")),
        Field("samples", Number(integer=True, minimum=0)), Field("drafts", _CNT),
        Field("draft_tokens", _CNT), Field("accepted_tokens", _CNT),
        Field("reset_before", Nullable(Text()))), build=SegmentInfo))),
    Field("operating_point", Obj((
        Field("running", Nullable(Obj((
            Field("samples", Number(integer=True, minimum=0)), Field("mean", _CNT),
            Field("distribution", List(Obj((
                Field("running", Number(integer=True, minimum=0, maximum=MAX_BATCH)),
                Field("samples", Number(integer=True, minimum=1))),
                build=lambda running, samples: (running, samples),
                parts=lambda v: {"running": v[0], "samples": v[1]}), max_items=MAX_POINTS),
                attr="values")), build=Distribution))),
        Field("prompt_tokens", _HIST), Field("generation_tokens", _HIST), Field("iteration_tokens", _HIST),
        Field("inter_token_latency_seconds", _HIST), Field("note", Nullable(Text()))),
        build=OperatingPoint)),
    Field("acceptance", Nullable(Obj((
        Field("kind", Choice(("per-position", "mean-length"))),
        Field("conditional", List(_count(maximum=1.0), min_items=1, max_items=MAX_POSITIONS)),
        Field("source", Text())), build=AcceptanceInfo))),
    Field("notes", List(Text())),
    Field("labels", Map(Text(), "observe --prometheus: the group's labels (model_name and --by)"),
          required=False),
    Field("steps", Nullable(Obj((
        *(Field(k, _CNT) for k in STEP_NUMBERS), Field("mean_running_basis", Text()),
        *(Field(k, _CNT) for k in STEP_NUMBERS_2),
        Field("time_per_output_token_seconds", _HIST), Field("decode_time_seconds", _HIST)),
        build=StepTiming, description="engine step timing of the window (vLLM), for spectune calibrate")),
        required=False),
    Field("speculative_config", Nullable(AnyObject()), required=False),
), build=Observation), version=SCHEMA_VERSION, make="spectune observe URL -o yaml")


def observation_to_dict(o: Observation) -> dict[str, Any]:
    """The versioned document, keys in schema order."""
    return OBSERVATION.dump(o)


def observation_from_dict(doc: Any, where: str = "observation",
                          lines: dict[str, int] | None = None) -> Observation:
    """Rebuild an :class:`Observation` from its document; errors name ``where``, the line
    (``lines``: key path -> line, when the document came from YAML) and the key."""
    r = Reader(where, lines or {}, ObserveUsageError)
    obs: Observation = OBSERVATION.load(doc, r)
    check_observation(obs, r)
    return obs


def check_observation(obs: Observation, r: Reader, at: str = "") -> None:
    """What the spec cannot say: counts that must agree with each other; ``at`` prefixes
    key paths (``groups[2].`` in a Fleet document)."""
    pp = obs.speculation.per_position
    if pp is not None and not len(pp.accepted) == len(pp.marginal) == len(pp.conditional):
        raise r.fail(f"{at}speculation.per_position",
                     "accepted, marginal and conditional must have one entry per position each")
    op = obs.operating_point
    run = op.running
    if run is not None:
        rp = f"{at}operating_point.running"
        if len({v for v, _ in run.values}) < len(run.values):
            raise r.fail(f"{rp}.distribution", "a running-request count appears twice")
        if sum(n for _, n in run.values) != run.samples:
            raise r.fail(f"{rp}.samples", f"{run.samples}, but the distribution counts "
                                          f"{sum(n for _, n in run.values)} samples")
    lengths = [h.mean for h in (op.prompt_tokens, op.generation_tokens)
               if h is not None and h.mean is not None]
    if sum(lengths) > MAX_CONTEXT:
        raise r.fail(f"{at}operating_point", f"mean prompt + generation length {sum(lengths):g} tokens "
                                             f"is above {MAX_CONTEXT:,} (the longest context spectune "
                                             "evaluates)")


def load_observation(path: str | Path) -> Observation:
    """Read a ``spectune observe -o yaml|json`` file (``-`` for stdin)."""
    doc, name, lines = read_document(path)
    return observation_from_dict(doc, name, lines)


def read_document(path: str | Path) -> tuple[Any, str, dict[str, int]]:
    """The parsed YAML or JSON document of ``path`` (``-`` for stdin), its name for messages
    and the line of each key path (YAML only; empty for JSON)."""
    from spectune.base.errors import InputError
    from spectune.documents.inputs import read_input

    name = str(path)
    try:
        text = read_input(name)
    except InputError as err:
        raise ObserveUsageError(f"cannot read observation file: {err.message}") from None
    try:
        doc, lines = parse_document(text, name)
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
