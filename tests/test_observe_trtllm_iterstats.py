"""`spectune observe` on a TensorRT-LLM 1.0-1.2.x server: no Prometheus spec-decode counters, its
``GET /metrics`` answers the iteration statistics (JSON) and drains them on every read.

The records are built from tests/fixtures/trtllm/iteration-stats-record.json, one iteration with
every field ``IterationStats`` serialises, in its order (``cpp/tensorrt_llm/executor/jsonSerialization.cpp``
@ 092229bb6e1ce6e7f0db2ba010b7fdaf654e1549: ``NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IterationStats, timestamp,
iter, ..., specDecodingStats)``, ``SpecDecodingStats{numDraftTokens, numAcceptedTokens,
numRequestsWithDraftTokens, acceptanceLength, iterLatencyMS, draftOverhead}``; the PyTorch backend
leaves ``staticBatchingStats`` unset: null) and ``acceptanceLength`` computed as
``PyExecutor._update_iter_stats`` does, (accepted + requests) / requests. A real HTTP server on
127.0.0.1 hands each GET of /metrics the next batch, as the drained queue does; the window's
acceptance must be exactly what the batches after the first scrape sum to.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from click.testing import CliRunner
from observe_support import FIXTURES, FakeClock, MetricsServer, Reply

from spectune.base.errors import (
    BadBodyFault,
    NoSpeculativeTraffic,
    ObserveUsageError,
    SpeculationNotEnabled,
)
from spectune.cli.main import cli
from spectune.engines import trtllm
from spectune.engines.trtllm.iterstats import IterationStatsReader, reader_for
from spectune.observe import observe_url

TEMPLATE = json.loads((FIXTURES / "trtllm" / "iteration-stats-record.json").read_text(encoding="utf-8"))
JSON = "application/json"


def record(it: int, draft_tokens: int | None, accepted: int = 0, drafts: int = 0,
           running: int = 8) -> dict[str, Any]:
    """One iteration record; ``draft_tokens`` None: a server without speculation (null stats)."""
    rec = copy.deepcopy(TEMPLATE)
    rec["iter"], rec["numActiveRequests"] = it, running
    if draft_tokens is None:
        rec["specDecodingStats"] = None
        return rec
    spec = rec["specDecodingStats"]
    spec.update(numDraftTokens=draft_tokens, numAcceptedTokens=accepted, numRequestsWithDraftTokens=drafts,
                acceptanceLength=(accepted + drafts) / drafts if drafts else 0.0)
    return rec


def batch(first: int, n: int, k: int = 3, accepted: int = 5, drafts: int = 4) -> str:
    """``n`` iterations from number ``first``, each with ``drafts`` requests drafting ``k`` tokens."""
    return json.dumps([record(first + i, k * drafts, accepted, drafts) for i in range(n)])


def serve(bodies: list[str], version: str | None = "1.2.1") -> MetricsServer:
    """GET /metrics answers ``bodies`` in turn (then ``[]``: the queue is empty); /version as given."""
    other = {"/version": Reply(body=json.dumps({"version": version}), content_type=JSON)} if version else {}
    return MetricsServer(lambda n: Reply(body=bodies[n] if n < len(bodies) else "[]", content_type=JSON),
                         other=other)


FAST: dict[str, Any] = {"window": 2.0, "interval": 1.0, "backoff": 0.02}


def observe(srv: MetricsServer, url: str | None = None, **kw: Any) -> Any:
    return observe_url(url or srv.url.removesuffix("/metrics"), clock=FakeClock().clock(), **{**FAST, **kw})


def test_acceptance_is_what_the_drained_iterations_imply_exactly() -> None:
    # GET 0, the first scrape, drains iterations from before the window (the baseline; read once,
    # as an exposition and then as JSON); GETs 1 and 2 are the window: 10 + 15 iterations of 4
    # drafts of 3 tokens with 5 accepted -> 100 drafts, 300 draft tokens, 125 accepted
    bodies = [batch(0, 10, accepted=12), batch(10, 10), batch(20, 15)]
    with serve(bodies) as srv:
        obs = observe(srv)
    s = obs.speculation
    assert (s.drafts, s.draft_tokens, s.accepted_tokens) == (100, 300, 125)
    assert s.num_speculative_tokens == 3
    assert s.mean_acceptance_length == pytest.approx(1 + 125 / 100, abs=1e-12)
    assert s.draft_acceptance_rate == pytest.approx(125 / 300, abs=1e-12)
    assert s.per_position is None and "no per-position" in (s.per_position_note or "")
    assert obs.acceptance is not None and obs.acceptance.kind == "mean-length"
    # the acceptance recommend gets yields exactly that mean length at K = 3
    assert float(obs.to_acceptance().expected_tokens(3)) == pytest.approx(1 + 125 / 100, abs=1e-9)
    assert obs.engine.name == "trtllm" and obs.engine.version == "1.2.1"
    assert obs.source.where.endswith("/metrics")
    assert obs.operating_point.running is not None and obs.operating_point.running.mean == 8


def test_a_request_metrics_page_without_spec_counters_leads_to_the_json() -> None:
    """A 1.2.x server also answers /prometheus/metrics, with request-level metrics only (names from
    tensorrt_llm/metrics/collector.py, stored version index id 46484645625): no speculative series,
    so host:port is read from /metrics."""
    page = ('# TYPE trtllm_request_success_total counter\n'
            'trtllm_request_success_total{engine_type="trtllm",finished_reason="stop",model_name="m"} 3.0\n')
    srv = serve([batch(0, 2), batch(2, 4), batch(6, 4)])
    srv.paths[trtllm.METRICS_PATH] = Reply(body=page)
    with srv:
        obs = observe(srv)
    assert obs.source.where == srv.url and "prometheus" not in obs.source.where
    assert (obs.speculation.drafts, obs.speculation.accepted_tokens) == (32, 40)


def test_a_url_with_the_metrics_path_reads_the_same() -> None:
    with serve([batch(0, 2), batch(2, 4), batch(6, 4)]) as srv:
        obs = observe(srv, srv.url)
    assert srv.hits == 3  # every answer read once: a drained queue hands a record out once
    assert (obs.speculation.drafts, obs.speculation.accepted_tokens) == (32, 40)


def test_shorter_drafts_need_k_and_k_below_the_mean_is_refused() -> None:
    # 4 requests drafting 10 tokens in all: drafts of 2.5 tokens on average (a draft_len_schedule)
    uneven = json.dumps([record(i, 10, 5, 4) for i in range(3)])
    with serve(["[]", uneven]) as srv, pytest.raises(ObserveUsageError, match="num-speculative-tokens"):
        observe(srv)
    with serve(["[]", uneven]) as srv:
        obs = observe(srv, num_speculative_tokens=3)
    assert obs.speculation.num_speculative_tokens == 3 and obs.speculation.drafts == 12
    with serve(["[]", uneven]) as srv, pytest.raises(ObserveUsageError, match="below the mean"):
        observe(srv, num_speculative_tokens=2)


def test_a_restart_cuts_the_window_and_both_segments_count() -> None:
    # iteration numbers go back at GET 2 (a new server): what it drained is the new baseline
    bodies = [batch(0, 5), batch(5, 10), batch(0, 6), batch(6, 2)]
    with serve(bodies) as srv:
        obs = observe(srv, window=3.0)
    assert len(obs.segments) == 2 and obs.segments[1].reset_before
    assert obs.speculation.drafts == (10 + 2) * 4 and obs.speculation.accepted_tokens == (10 + 2) * 5


def test_skipped_iteration_numbers_are_noted() -> None:
    with serve([batch(0, 2), batch(2, 3), batch(9, 3)]) as srv:
        obs = observe(srv)
    assert any("4 iteration numbers were never answered" in n for n in obs.notes)


def test_speculation_off_and_no_records_are_told_apart() -> None:
    off = json.dumps([record(i, None) for i in range(3)])
    with serve([off, off]) as srv, pytest.raises(SpeculationNotEnabled, match="specDecodingStats"):
        observe(srv)
    with serve([]) as srv, pytest.raises(NoSpeculativeTraffic, match="enable_iter_perf_stats"):
        observe(srv)


def test_a_server_with_the_prometheus_counters_is_not_read_as_json() -> None:
    assert reader_for("1.3.0rc5") is None and reader_for("1.4.0") is None
    assert reader_for("1.2.1") is not None and reader_for(None) is not None
    with serve([batch(0, 2), batch(2, 2)], version="1.3.0rc5") as srv, pytest.raises(BadBodyFault):
        observe(srv)


def test_a_failed_answer_changes_nothing() -> None:
    reader = IterationStatsReader()
    reader(batch(0, 2))
    bad = json.dumps([record(2, 12, 5, 4), {"iter": 3, "specDecodingStats": {"numDraftTokens": -1}}])
    with pytest.raises(BadBodyFault):
        reader(bad)
    assert reader(batch(2, 1)).total(trtllm.metrics.DRAFT_TOKENS) == 3 * 12


# ----------------------------------------------------------------------------- hostile answers
def _spec(**fields: Any) -> str:
    rec = record(1, 12, 5, 4)
    rec["specDecodingStats"].update(fields)
    return json.dumps([rec])


def _without(key: str) -> str:
    rec = record(1, 12, 5, 4)
    rec["specDecodingStats"].pop(key)
    return json.dumps([rec])


HOSTILE = [
    # JSON, but no list: the exposition parser's fault is the one shown
    ("object", '{"iter": 1}', "answered with JSON"),
    ("string", '"metrics"', "not Prometheus exposition format"),
    ("number-list", "[1, 2]", "iteration record 0 is not an object"),
    ("no-iter", json.dumps([{"specDecodingStats": None}]), "iteration record 0 has no 'iter'"),
    ("iter-negative", json.dumps([{"iter": -1}]), "'iter' is -1"),
    ("iter-text", json.dumps([{"iter": "7"}]), "'iter' is '7'; a whole number"),
    ("iter-bool", json.dumps([{"iter": True}]), "'iter' is True; a whole number"),
    ("iter-fraction", json.dumps([{"iter": 1.5}]), "'iter' is 1.5"),
    ("iter-huge", json.dumps([{"iter": 1e300}]), "'iter' is 1e+300"),
    ("spec-list", json.dumps([{"iter": 1, "specDecodingStats": []}]), "'specDecodingStats' is not an object"),
    ("no-accepted", _without("numAcceptedTokens"), "has no 'numAcceptedTokens'"),
    ("no-requests", _without("numRequestsWithDraftTokens"), "has no 'numRequestsWithDraftTokens'"),
    ("draft-negative", _spec(numDraftTokens=-3), "'specDecodingStats.numDraftTokens' is -3"),
    ("draft-text", _spec(numDraftTokens="12"), "'specDecodingStats.numDraftTokens' is '12'"),
    ("draft-null", _spec(numDraftTokens=None), "'specDecodingStats.numDraftTokens' is null"),
    ("draft-huge", _spec(numDraftTokens=2**60, numAcceptedTokens=1), "from 0 to 9,007,199,254,740,992"),
    ("accepted-over", _spec(numAcceptedTokens=13), "13 accepted tokens but 12 draft tokens"),
    ("requests-over", _spec(numRequestsWithDraftTokens=13), "13 requests with draft tokens but 12"),
    ("tokens-without-requests", _spec(numRequestsWithDraftTokens=0), "0 requests with draft tokens but 12"),
    ("running-negative", json.dumps([{**record(1, 12, 5, 4), "numActiveRequests": -2}]),
     "'numActiveRequests' is -2"),
    # not JSON at all: the exposition parser's fault is the one shown
    ("nan", '[{"iter": NaN}]', ""),
    ("deep", "[" * 5000 + "]" * 5000, ""),
    ("truncated", batch(0, 3)[:-40], ""),
]


@pytest.mark.parametrize(("body", "says"), [(b, s) for _, b, s in HOSTILE], ids=[n for n, _, _ in HOSTILE])
def test_a_hostile_answer_is_one_line_naming_url_and_field(body: str, says: str) -> None:
    with serve([body, body]) as srv:
        with pytest.raises(BadBodyFault) as err:
            observe(srv, srv.url)
        url = srv.url
    assert says in err.value.message and err.value.message.startswith(url)
    assert "\n" not in err.value.message


def test_the_command_line_exits_with_the_bad_body_code_and_one_line() -> None:
    with serve([_spec(numAcceptedTokens=13)] * 2) as srv:
        res = CliRunner().invoke(cli, ["observe", srv.url, "--window", "1", "--interval", "0.5", "-q"])
    assert res.exit_code == BadBodyFault.exit_code == 5
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "13 accepted tokens but 12 draft tokens" in lines[0]
    assert "Traceback" not in res.output


def test_a_huge_answer_is_refused_unread() -> None:
    srv = MetricsServer(lambda n: Reply(body="[]", content_type=JSON, declared=64 << 20))
    with srv, pytest.raises(BadBodyFault, match="MiB"):
        observe(srv, srv.url)
