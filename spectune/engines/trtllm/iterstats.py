"""TensorRT-LLM's iteration statistics -- the JSON list ``trtllm-serve`` answers at ``GET /metrics`` --
read as running counters: the speculative-decoding source of releases without the Prometheus
spec-decode counters (1.0 to 1.2.x; :data:`~spectune.engines.trtllm.releases.METRICS_MIN`).

What the server sends (NVIDIA/TensorRT-LLM, read as stored text; the wheel needs CUDA):

* ``tensorrt_llm/serve/openai_server.py`` (stored version, index id 2399813437): ``/metrics`` is
  ``get_iteration_stats``, which collects ``async for stat in self.llm.get_stats_async(2)`` and
  answers the list as JSON; ``tensorrt_llm/executor/result.py`` @ 005bc848893f575ec14b45d6b13139360d67c790,
  ``IterationResult.__anext__``, yields ``json.loads(data)`` for each queued record: every element
  is one iteration's object.
* Field names: ``cpp/tensorrt_llm/executor/jsonSerialization.cpp`` @
  092229bb6e1ce6e7f0db2ba010b7fdaf654e1549, ``NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IterationStats,
  timestamp, iter, iterLatencyMS, ..., numActiveRequests, ..., specDecodingStats)`` and
  ``(SpecDecodingStats, numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens,
  acceptanceLength, iterLatencyMS, draftOverhead)``; ``specDecodingStats`` is an optional
  (``jsonSerializeOptional.h``): ``null`` when the server does not speculate.
* Their meaning: ``PyExecutor._update_iter_stats`` (``tensorrt_llm/_torch/pyexecutor/py_executor.py``,
  stored version index id 3542389387, the form NVIDIA/TensorRT-LLM#9855 gave it): over one
  iteration's scheduled generation requests, ``numDraftTokens`` = their draft tokens,
  ``numAcceptedTokens`` = their accepted draft tokens, ``numRequestsWithDraftTokens`` = how many
  carried a draft (one verify pass each: spectune's drafts); ``_get_init_iter_stats`` creates
  ``specDecodingStats`` only when the server has a speculative config. Before #9855 (1.0, 1.1)
  only two-model drafters filled them: one-model MTP / EAGLE-3 count 0 drafts there.
* Records exist only with ``enable_iter_perf_stats: true`` (``TorchLlmArgs``, default False, in
  ``tensorrt_llm/llmapi/llm_args.py`` of 1.0, 1.1 and 1.2: stored versions index ids 1520735490,
  1090804222, 7019226376); without it every answer is ``[]``. The queue keeps ``max_stats_len``
  records (default 1000; ``PyExecutor._append_iter_stats`` drops the oldest beyond it).
* No per-position counts: nothing in these records says which draft position was accepted, so
  the observation has no per-position rates and says so (as for SGLang).

**The endpoint drains its queue**: each record is handed out once, so every GET answers the
iterations since the previous GET (``docs/source/commands/trtllm-serve/trtllm-serve.rst``:
"stored in an internal queue and removed once retrieved"). A window is therefore the iterations
returned between its first and last scrape, summed: :class:`IterationStatsReader` keeps running
sums of everything it was answered, so each scrape becomes a snapshot of counters -- the same sums
TensorRT-LLM's own Prometheus collector keeps of the same fields from 1.3.0rc on
(``tensorrt_llm/metrics/collector.py`` @ 050f80def8df236e326949c8bd9dee10fd896a83,
``log_iteration_stats``: ``trtllm_spec_decode_num_draft_tokens_total`` and
``..._num_accepted_tokens_total``) -- and the window, reset and validation rules every engine
shares apply unchanged. What the first scrape drains happened before the window (its baseline);
iteration numbers that go back mean a restart: the counters are re-created and the window is cut
there. One poller only: a second client reading ``/metrics`` takes records this one never sees
(skipped iteration numbers are counted and noted). That is also why a server with the counters
(1.3.0rc on) is not read this way: there a Prometheus collector loop drains the same queue
(``openai_server.py`` stored version index id 51781230266, "Iteration stats collector loop"; later
teed into a buffer for ``/metrics``, index id 54820179511, "nvbug 6102381").

Before the counters, ``/prometheus/metrics`` (NVIDIA/TensorRT-LLM#5785) carries request-level
metrics only (``trtllm_request_success_total``, latency histograms; ``collector.py`` stored version
index id 46484645625): ``spectune observe`` tries it first and, finding no speculative series,
reads ``/metrics`` with :class:`IterationStatsReader` (:func:`spectune.observe.api._first_scrape`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from spectune.base.errors import BadBodyFault
from spectune.base.limits import MAX_BATCH, MAX_COUNT
from spectune.base.redact import clip
from spectune.documents.exposition import Exposition, Series
from spectune.documents.inputs import JsonProblem, parse_json
from spectune.engines.engine_version import release
from spectune.engines.trtllm.metrics import (
    ACCEPTED,
    DRAFT_TOKENS,
    JSON_CREATED,
    JSON_DRAFTS,
    JSON_ITERATIONS,
    JSON_SKIPPED,
    JSON_SPECULATING,
    RUNNING,
)
from spectune.engines.trtllm.releases import METRICS_MIN

#: More records than one answer can hold: the queue keeps max_stats_len (default 1000) records.
MAX_RECORDS = 1_000_000
SPEC = "specDecodingStats"
SPEC_FIELDS = ("numDraftTokens", "numAcceptedTokens", "numRequestsWithDraftTokens")


def _count(value: Any, where: str, top: float = MAX_COUNT) -> int:
    """``value`` as a whole count from 0 to ``top`` (JSON integers; 3.0 is accepted, true is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = "null" if value is None else clip(repr(value), 40)
        raise BadBodyFault(f"{where} is {shown}; a whole number was expected")
    if not 0 <= value <= top or value != int(value):  # NaN fails too (parse_json refuses it anyway)
        raise BadBodyFault(f"{where} is {value!r}; a whole number from 0 to {top:,.0f} was expected")
    return int(value)


@dataclass(frozen=True)
class _Record:
    """One iteration, checked: ``spec`` is (draft tokens, accepted, drafts) or None (not speculating)."""

    iteration: int
    running: int | None
    spec: tuple[int, int, int] | None


def _record(rec: Any, i: int) -> _Record:
    at = f"iteration record {i}"
    if not isinstance(rec, dict):
        raise BadBodyFault(f"{at} is not an object; TensorRT-LLM's /metrics lists one object per iteration")
    if "iter" not in rec:
        raise BadBodyFault(f"{at} has no 'iter'; TensorRT-LLM's iteration statistics number every record")
    iteration = _count(rec["iter"], f"{at} 'iter'")
    running = rec.get("numActiveRequests")
    if running is not None:
        running = _count(running, f"{at} 'numActiveRequests'", MAX_BATCH)
    spec = rec.get(SPEC)
    if spec is None:
        return _Record(iteration, running, None)
    if not isinstance(spec, dict):
        raise BadBodyFault(f"{at} '{SPEC}' is not an object (expected {{{', '.join(SPEC_FIELDS)}, ...}} "
                           "or null)")
    missing = [f for f in SPEC_FIELDS if f not in spec]
    if missing:
        raise BadBodyFault(f"{at} '{SPEC}' has no {', '.join(repr(f) for f in missing)}")
    dtok, acc, drafts = (_count(spec[f], f"{at} '{SPEC}.{f}'") for f in SPEC_FIELDS)
    if acc > dtok:
        raise BadBodyFault(f"{at}: {acc} accepted tokens but {dtok} draft tokens: no more tokens can be "
                           "accepted than were drafted (a broken exporter): refused")
    if drafts > dtok or (dtok > 0 and drafts == 0):
        raise BadBodyFault(f"{at}: {drafts} requests with draft tokens but {dtok} draft tokens: every "
                           "request with a draft has at least one draft token, and draft tokens belong to "
                           "one: refused")
    return _Record(iteration, running, (dtok, acc, drafts))


def parse_json_body(text: str) -> Any:
    """The JSON value of an answer (:class:`BadBodyFault` when it is not JSON)."""
    try:
        return parse_json(text)
    except JsonProblem as exc:
        raise BadBodyFault(f"not JSON ({exc.message}) and not Prometheus text") from None


def parse_iterations(body: Any) -> list[_Record]:
    """The checked records of one answer's JSON value (:class:`BadBodyFault` naming the record and
    field)."""
    if not isinstance(body, list):
        kind = {dict: "an object", str: "a string", bool: "a boolean"}.get(type(body), "a number")
        raise BadBodyFault(f"answered {kind if body is not None else 'null'} in JSON, not the list of "
                           "iteration records TensorRT-LLM's /metrics answers")
    if len(body) > MAX_RECORDS:
        raise BadBodyFault(f"answered {len(body):,} iteration records, more than {MAX_RECORDS:,} (the queue "
                           "keeps max_stats_len records, 1000 by default)")
    return [_record(rec, i) for i, rec in enumerate(body)]


@dataclass
class IterationStatsReader:
    """Turns each answer of ``/metrics`` into an :class:`Exposition` of running counters (see the
    module docstring): call it with the body and its content type, in the order the answers came.
    An answer that fails a check changes nothing. ``matched`` is True once an answer was a JSON
    list (so its faults are about iteration records, not about a body of another kind)."""

    matched: bool = False
    _draft_tokens: int = 0
    _accepted: int = 0
    _drafts: int = 0
    _iterations: int = 0
    _speculating: int = 0
    _skipped: int = 0
    _runs: int = 0
    _last: int | None = None

    def __call__(self, text: str, content_type: str | None = None) -> Exposition:
        body = parse_json_body(text)
        self.matched = self.matched or isinstance(body, list)
        records = parse_iterations(body)
        for r in records:
            if self._last is not None and r.iteration < self._last:  # numbering restarted: a new server
                self._restart()
            elif self._last is not None and r.iteration > self._last + 1:
                self._skipped += r.iteration - self._last - 1
            self._last = r.iteration
            self._iterations += 1
            if r.spec is not None:
                self._speculating += 1
                self._draft_tokens += r.spec[0]
                self._accepted += r.spec[1]
                self._drafts += r.spec[2]
        return self._exposition(records[-1].running if records else None)

    def _restart(self) -> None:
        self._runs += 1
        self._draft_tokens = self._accepted = self._drafts = self._iterations = self._speculating = 0
        self._skipped = 0

    def _exposition(self, running: int | None) -> Exposition:
        counters = {DRAFT_TOKENS: self._draft_tokens, ACCEPTED: self._accepted, JSON_DRAFTS: self._drafts,
                    JSON_ITERATIONS: self._iterations, JSON_SPECULATING: self._speculating,
                    JSON_SKIPPED: self._skipped}
        samples = {name: (Series(name, (), float(v)),) for name, v in counters.items()}
        types = {name.removesuffix("_total"): "counter" for name in counters}
        # which server run: a restart re-creates the counters (the shared reset rule sees it change)
        samples[JSON_CREATED] = (Series(JSON_CREATED, (), float(self._runs)),)
        types[JSON_CREATED] = "gauge"
        if running is not None:  # the last iteration before the scrape: as a gauge sampled then
            samples[RUNNING] = (Series(RUNNING, (), float(running)),)
            types[RUNNING] = "gauge"
        return Exposition(MappingProxyType(samples), MappingProxyType(types))


def reader_for(version: str | None) -> IterationStatsReader | None:
    """A reader for a TensorRT-LLM server's ``/metrics`` JSON, or None when ``version`` is known and
    has the Prometheus spec-decode counters (>= :data:`METRICS_MIN`rc): there they are the source
    (cumulative, per position, not drained by reading)."""
    if version is not None:
        try:
            if release(version) >= release(METRICS_MIN):
                return None
        except ValueError:
            pass
    return IterationStatsReader()
