"""`spectune observe` against a real HTTP server on 127.0.0.1: every fault has its own one-line
message and exit code, counter resets split the window, the token is never shown."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from observe_support import (
    CLI_FAST,
    PROM,
    Engine,
    FakeClock,
    MetricsServer,
    Reply,
    cli_run,
    closed_port,
    fast,
    growing,
    ok,
    one_line_error,
    sequence,
    sglang_text,
    vllm_text,
)

from spectune.base.errors import (
    EXIT_BAD_BODY,
    EXIT_CONNECTION,
    EXIT_DNS,
    EXIT_HTTP_STATUS,
    EXIT_NO_SPEC_TRAFFIC,
    EXIT_SPEC_DISABLED,
    EXIT_TIMEOUT,
    BadBodyFault,
    ConnectionFault,
    HTTPStatusFault,
    NoSpeculativeTraffic,
    ObserveUsageError,
    SpeculationNotEnabled,
    TimeoutFault,
)
from spectune.observe import observation_acceptance, observation_operating_point, observe_url


# --------------------------------------------------------------------------- happy paths
def test_the_window_runs_on_the_clock_it_is_given() -> None:
    """A 30 s window scraped every 10 s on a fake clock: four scrapes stamped 10 s apart, the
    window 30 s long, and the waiting done by the clock's sleep (the real clock would have
    taken 30 s; before observe_url took a clock it could only sleep for real)."""
    fake = FakeClock()
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        obs = observe_url(srv.url, window=30, interval=10, ask_version=False, clock=fake.clock())
        assert srv.hits == 4
    assert obs.window.samples == 4 and obs.window.seconds == pytest.approx(30)
    assert obs.window.interval_seconds == 10 and sum(fake.slept) == pytest.approx(30)
    assert obs.speculation.drafts == 30  # 10 per scrape interval (growing)


def test_window_deltas_through_library() -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        obs = observe_url(srv.url, **fast())
        hits = srv.hits
    steps = hits - 1
    s = obs.speculation
    assert (s.drafts, s.draft_tokens, s.accepted_tokens) == (10 * steps, 25 * steps, 15 * steps)
    assert s.per_position is not None
    assert s.per_position.marginal == pytest.approx((0.8, 0.5, 0.2))
    assert s.per_position.conditional == pytest.approx((0.8, 0.625, 0.4))
    assert s.mean_acceptance_length == pytest.approx(2.5)
    assert obs.window.samples == hits and obs.window.failed_samples == 0
    assert 0.55 <= (obs.window.seconds or 0) <= 2.0
    acc = observation_acceptance(obs)
    assert acc.rates == pytest.approx((0.8, 0.625, 0.4))
    assert srv.url in acc.source
    point = observation_operating_point(obs)
    # issue 9 (deliberate change): Little's law over the inter-token latencies, not the gauge
    assert obs.steps is not None and obs.steps.mean_running is not None
    assert point["batch_sizes"] == [max(1, round(obs.steps.mean_running))]
    assert point["batch_basis"].startswith("Little's law") and 2 <= point["mean_running"] <= 3  # gauge
    assert point["context_lengths"] == [17 + 32]
    assert obs.operating_point.inter_token_latency_seconds is not None
    assert obs.operating_point.inter_token_latency_seconds.mean == pytest.approx(0.01)


def test_engines_are_summed_and_model_filtered() -> None:
    def page(n: int) -> Reply:
        a, b = growing(n), growing(2 * n)
        b.engine = "1"
        other = growing(5 * n)
        other.model = "other-model"
        return ok(a, b, other)

    with MetricsServer(page) as srv:
        with pytest.raises(ObserveUsageError, match=r"several models.*other-model.*tiny-llama"):
            observe_url(srv.url, **fast())
        assert srv.hits == 1  # failed on the first scrape, did not wait for the window
        start = srv.hits
        obs = observe_url(srv.url, model_name="tiny-llama", **fast())
        steps = srv.hits - start - 1
        with pytest.raises(ObserveUsageError, match="'nope' is not served"):
            observe_url(srv.url, model_name="nope", **fast())
    assert obs.model_name == "tiny-llama"
    assert obs.speculation.drafts == 10 * steps + 20 * steps  # engine 0 + engine 1
    assert obs.speculation.per_position is not None
    assert obs.speculation.per_position.marginal == pytest.approx((0.8, 0.5, 0.2))


def test_cli_yaml_loads_back_and_feeds_recommend(tmp_path: Path) -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST, "-o", "yaml", "--save-scrapes", str(tmp_path / "raw")])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # no progress bar when stderr is not a terminal
    path = tmp_path / "obs.yaml"
    path.write_text(res.stdout)
    index = json.loads((tmp_path / "raw" / "index.json").read_text())
    assert index[0]["file"] == "scrape-000.txt" and len(index) >= 3
    assert (tmp_path / "raw" / "scrape-000.txt").read_text() == vllm_text(growing(0))
    from spectune.observe import load_observation

    obs = load_observation(path)
    assert obs.speculation.per_position is not None
    assert obs.acceptance.conditional == pytest.approx((0.8, 0.625, 0.4), abs=1e-6)
    table = cli_run([srv.url, *CLI_FAST]) if False else None
    assert table is None


def test_cli_table_output() -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST])
    assert res.exit_code == 0, res.output
    out = res.stdout
    for text in ("vllm", "tiny-llama", "mean acceptance length", "conditional a_i", "0.625",
                 "running requests", "acceptance for recommend"):
        assert text in out


# --------------------------------------------------------------------------- resets
def test_counter_reset_splits_the_window() -> None:
    restarted = Engine(drafts=10, draft_tokens=25, accepted=15, per_pos=(8, 5, 2), created=1795399999.0)
    later = Engine(drafts=30, draft_tokens=75, accepted=45, per_pos=(24, 15, 6), created=1795399999.0)
    script = sequence(ok(growing(0)), ok(growing(1)), ok(restarted, process_start=1795399990.0),
                      ok(later, process_start=1795399990.0))
    with MetricsServer(script) as srv:
        obs = observe_url(srv.url, **fast())
    assert len(obs.segments) == 2
    assert obs.segments[1].reset_before is not None
    assert "restarted" in obs.segments[1].reset_before
    # (growing(1) - growing(0)) + (later - restarted); the interval across the restart is excluded
    assert obs.speculation.drafts == 10 + 20
    assert obs.speculation.accepted_tokens == 15 + 30
    assert "summed over 2" in obs.speculation.basis
    assert any("counter reset" in n for n in obs.notes)


def test_reset_seen_from_a_falling_counter_alone() -> None:
    """Same _created stamps, same process start: only the drafts counter going down shows it."""
    low = growing(3)
    low.drafts, low.draft_tokens, low.accepted, low.per_pos = 1, 3, 2, (1, 1, 0)
    later = growing(3)
    later.drafts, later.draft_tokens, later.accepted, later.per_pos = 11, 28, 17, (9, 6, 2)
    script = sequence(ok(growing(3)), ok(low), ok(later))
    with MetricsServer(script) as srv:
        obs = observe_url(srv.url, **fast())
    assert len(obs.segments) == 2
    assert "spec_decode_num_accepted_tokens_per_pos_total" in (obs.segments[1].reset_before or "")
    assert "fell from 104 to 1" in (obs.segments[1].reset_before or "")
    assert obs.speculation.drafts == 10


def test_segments_with_different_k_use_the_biggest() -> None:
    k4a = Engine(drafts=0, draft_tokens=0, accepted=0, per_pos=(0, 0, 0, 0), created=1795399999.0)
    k4b = Engine(drafts=5, draft_tokens=20, accepted=4, per_pos=(2, 1, 1, 0), created=1795399999.0)
    script = sequence(ok(growing(0)), ok(growing(10)), ok(k4a), ok(k4b))
    with MetricsServer(script) as srv:
        obs = observe_url(srv.url, **fast())
    assert obs.speculation.drafts == 100
    assert "most drafts" in obs.speculation.basis


# --------------------------------------------------------------------------- HTTP faults
def test_500s_then_recovery(tmp_path: Path) -> None:
    fails = {"n": 0}

    def script(n: int) -> Reply:
        if n < 2:
            fails["n"] += 1
            return Reply(500, "boom", "text/plain")
        return ok(growing(n))

    with MetricsServer(script) as srv:
        obs = observe_url(srv.url, retries=3, **fast())
    assert fails["n"] == 2
    assert any("needed 3 attempts" in n and "HTTP 500" in n for n in obs.notes)
    # via the CLI (default backoff 0.5 s): one 500, then fine
    with MetricsServer(lambda n: Reply(503, "busy", "text/plain") if n == 0 else ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST, "-o", "json"])
    assert res.exit_code == 0, res.output
    assert any("HTTP 503" in n for n in json.loads(res.stdout)["notes"])


def test_500_forever_is_http_status_fault() -> None:
    with MetricsServer(lambda n: Reply(500, "boom", "text/plain")) as srv:
        with pytest.raises(HTTPStatusFault, match=r"HTTP 500.*\(3 attempts\)"):
            observe_url(srv.url, retries=2, **fast())
        assert srv.hits == 3
        res = cli_run([srv.url, *CLI_FAST, "--retries", "0"])
    line = one_line_error(res, EXIT_HTTP_STATUS)
    assert "HTTP 500" in line


def test_404_is_not_retried() -> None:
    with MetricsServer(lambda n: Reply(404, "no", "text/plain")) as srv:
        res = cli_run([srv.url, *CLI_FAST, "--retries", "3"])
        assert srv.hits == 1
    line = one_line_error(res, EXIT_HTTP_STATUS)
    assert "HTTP 404" in line and "/metrics" in line


def test_slow_answers_beyond_timeout() -> None:
    with MetricsServer(lambda n: Reply(200, vllm_text(growing(n)), PROM, delay=1.5)) as srv:
        t = time.monotonic()
        with pytest.raises(TimeoutFault, match=r"--timeout 0\.3"):
            observe_url(srv.url, timeout=0.3, retries=1, **fast())
        assert time.monotonic() - t < 3.0
        res = cli_run([srv.url, *CLI_FAST, "--timeout", "0.3", "--retries", "0"])
    line = one_line_error(res, EXIT_TIMEOUT)
    assert "within --timeout 0.3 s" in line


@pytest.mark.parametrize("body,ctype,says", [
    ("hello world\n", "text/plain", "not Prometheus exposition format"),
    ("<html><body><h1>Welcome to nginx!</h1></body></html>\n", "text/html", "HTML page"),
    ("<!DOCTYPE html>\n<html><head></head></html>\n", "text/plain", "HTML page"),
    ('{"status": "ok"}\n', "application/json", "JSON"),
    ("", "text/plain", "empty body"),
    ("# HELP only comments\n", "text/plain", "no metric samples"),
    (b"\xff\xfe\x00garbage\x00", "application/octet-stream", "not text"),
])
def test_bodies_that_are_not_prometheus_text(body: str | bytes, ctype: str, says: str) -> None:
    with MetricsServer(lambda n: Reply(200, body, ctype)) as srv:
        with pytest.raises(BadBodyFault, match=says):
            observe_url(srv.url, **fast())
        assert srv.hits == 1  # a bad body is not retried
        res = cli_run([srv.url, *CLI_FAST])
    assert says in one_line_error(res, EXIT_BAD_BODY)


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(ConnectionFault, match=r"connection refused.*\(2 attempts\)"):
        observe_url(url, retries=1, **fast())
    res = cli_run([url, *CLI_FAST, "--retries", "0"])
    assert "connection refused" in one_line_error(res, EXIT_CONNECTION)


def test_dns_failure() -> None:
    res = cli_run(["http://no-such-host.invalid:8000/metrics", *CLI_FAST, "--retries", "0"])
    assert "cannot resolve host 'no-such-host.invalid'" in one_line_error(res, EXIT_DNS)


def test_utf8_without_charset() -> None:
    """text/plain with no charset is read as UTF-8 (the exposition format's encoding)."""
    def page(n: int) -> Reply:
        e = growing(n)
        e.model = "modèle-ü"
        return Reply(200, vllm_text(e).encode("utf-8"), "text/plain")

    with MetricsServer(page) as srv:
        obs = observe_url(srv.url, **fast())
    assert obs.model_name == "modèle-ü"


def test_bare_host_port_gets_metrics_path() -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        hostport = srv.url.removeprefix("http://").removesuffix("/metrics")
        obs = observe_url(hostport, **fast())
    assert obs.source.where == srv.url


# --------------------------------------------------------------------------- speculation faults
def test_speculation_off_records_the_plain_decode_window() -> None:
    """Issue 9 (deliberate change: this used to exit 7): a vLLM without speculation gives a
    plain-decode window, exit 0, no acceptance, with the step timing calibration needs."""
    with MetricsServer(lambda n: ok(growing(n), spec=False)) as srv:
        res = cli_run([srv.url, *CLI_FAST, "-o", "json", "--speculative-config", '{"method": "none"}'])
        table = cli_run([srv.url, *CLI_FAST])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["acceptance"] is None and doc["speculation"]["drafts"] is None
    steps = doc["steps"]
    n = steps["engine_steps"] / 7  # scrapes between first and last: 7 engine steps each
    assert steps["sequence_steps"] == pytest.approx(15 * n)
    assert steps["step_seconds"] == pytest.approx(0.01)  # +0.15 s over +15 latencies per scrape
    assert steps["sequences_per_step"] == pytest.approx(15 / 7)
    assert steps["decode_seconds"] == pytest.approx(0.15 * n)
    assert steps["mean_running"] == pytest.approx(0.15 * n / doc["window"]["seconds"], rel=1e-3)
    assert steps["verify_width"] == 1.0 and steps["draft_fraction"] is None
    assert doc["speculative_config"] == {"method": "none"}
    assert "plain-decode window" in " ".join(doc["notes"])
    assert table.exit_code == 0 and "acceptance: none" in table.stdout


def test_speculation_not_enabled_on_sglang_fails_fast() -> None:
    with MetricsServer(lambda n: Reply(200, "sglang:num_running_reqs 2\n")) as srv:
        res = cli_run([srv.url, "--window", "30", "-q"])  # would take 30 s if it waited
        assert srv.hits == 1
    line = one_line_error(res, EXIT_SPEC_DISABLED)
    assert "not enabled" in line


def test_not_an_llm_server() -> None:
    with MetricsServer(lambda n: Reply(200, "node_load1 0.5\n")) as srv, \
            pytest.raises(SpeculationNotEnabled, match="not a vLLM or SGLang or TensorRT-LLM server"):
        observe_url(srv.url, **fast())


def test_no_speculative_traffic_in_window() -> None:
    with MetricsServer(lambda n: ok(growing(0))) as srv:
        with pytest.raises(NoSpeculativeTraffic, match="0 drafts"):
            observe_url(srv.url, **fast())
        res = cli_run([srv.url, *CLI_FAST])
    line = one_line_error(res, EXIT_NO_SPEC_TRAFFIC)
    assert "no speculative traffic" in line and "enabled" in line


def test_intermediate_failure_is_noted_and_skipped() -> None:
    def script(n: int) -> Reply:
        return Reply(404, "gone", "text/plain") if n == 1 else ok(growing(n))

    with MetricsServer(script) as srv:
        obs = observe_url(srv.url, **fast())
    assert obs.window.failed_samples == 1
    assert any("sample 1 failed and was skipped" in n for n in obs.notes)


def test_failed_end_of_window_scrape_raises() -> None:
    with MetricsServer(lambda n: ok(growing(n)) if n < 3 else Reply(500, "x", "text/plain")) as srv, \
            pytest.raises(HTTPStatusFault, match="end-of-window scrape failed"):
        observe_url(srv.url, retries=0, **fast())


# --------------------------------------------------------------------------- SGLang
def test_sglang_mean_only() -> None:
    with MetricsServer(lambda n: Reply(200, sglang_text(2.2, 0.4, dp_ranks=2))) as srv:
        obs = observe_url(srv.url, **fast())
    s = obs.speculation
    assert obs.engine.name == "sglang"
    assert s.per_position is None and "no per-position" in (s.per_position_note or "")
    assert s.mean_acceptance_length == pytest.approx(2.2)  # tp_rank 1 (99.0) ignored
    assert s.num_speculative_tokens == 3  # (2.2 - 1) / 0.4
    acc = observation_acceptance(obs)
    assert len(acc.rates) == 1 and float(acc.expected_tokens(3)) == pytest.approx(2.2)
    assert "i.i.d. alpha" in acc.source and "mean acceptance length" in acc.source
    assert observation_operating_point(obs)["batch_sizes"] == [4]  # 2 DP ranks x 2


def test_sglang_idle_and_unknown_k() -> None:
    with MetricsServer(lambda n: Reply(200, sglang_text(0.0, 0.0))) as srv, \
            pytest.raises(NoSpeculativeTraffic, match="cannot tell"):
        observe_url(srv.url, **fast())
    with MetricsServer(lambda n: Reply(200, sglang_text(2.0, None))) as srv:
        with pytest.raises(ObserveUsageError, match="--num-speculative-tokens"):
            observe_url(srv.url, **fast())
        obs = observe_url(srv.url, num_speculative_tokens=4, **fast())
    assert obs.speculation.num_speculative_tokens == 4
