"""`spectune observe` on a TensorRT-LLM server: its /prometheus/metrics speculative-decoding counters
(reconstructed pages tests/fixtures/trtllm/prometheus-*.txt; names, types and labels from
tensorrt_llm/metrics/collector.py, cited in their headers) served by a real HTTP server on 127.0.0.1,
read with the window, reset and validation rules every engine shares; and its recording rules."""

from __future__ import annotations

import pytest
from observe_support import FIXTURES, MetricsServer, Reply

from spectune.base.errors import BadBodyFault, ObserveUsageError, SpeculationNotEnabled
from spectune.documents.exposition import parse_exposition
from spectune.documents.window import Capture, Snapshot
from spectune.engines import trtllm
from spectune.observe import detect_engine, observe_url

START = (FIXTURES / "trtllm" / "prometheus-start.txt").read_text(encoding="utf-8")
END = (FIXTURES / "trtllm" / "prometheus-end.txt").read_text(encoding="utf-8")
MODEL = "deepseek-ai/DeepSeek-V3"
FAST = {"window": 0.4, "interval": 0.2, "backoff": 0.02}


def _serve(pages: list[str]) -> MetricsServer:
    version = Reply(body='{"version": "1.3.0rc5"}', content_type="application/json")
    return MetricsServer(lambda n: Reply(body=pages[min(n, len(pages) - 1)]),
                         metrics_path=trtllm.METRICS_PATH, other={"/version": version})


def test_acceptance_is_what_the_counters_imply_exactly() -> None:
    # window deltas (end - start): drafted per position 400, 400, 400; accepted 300, 200, 120
    with _serve([START, END]) as srv:
        assert srv.url.endswith("/prometheus/metrics")
        obs = observe_url(srv.url, **FAST)  # type: ignore[arg-type]
    assert obs.engine.name == "trtllm" and obs.engine.version == "1.3.0rc5"
    assert obs.model_name == MODEL
    s = obs.speculation
    assert (s.drafts, s.draft_tokens, s.accepted_tokens) == (400, 1200, 620)
    assert s.num_speculative_tokens == 3
    assert s.mean_acceptance_length == pytest.approx(1 + 620 / 400, abs=1e-12)
    assert s.draft_acceptance_rate == pytest.approx(620 / 1200, abs=1e-12)
    # conditional a_i = accepted_i / accepted_{i-1} (a_1 = accepted_1 / drafts)
    assert obs.acceptance is not None and obs.acceptance.kind == "per-position"
    assert list(obs.acceptance.conditional) == pytest.approx([300 / 400, 200 / 300, 120 / 200], abs=1e-12)


def test_detected_by_its_prefix_and_refused_without_spec_counters() -> None:
    assert detect_engine(parse_exposition(END)) == "trtllm"
    plain = 'trtllm_num_requests_running{engine_type="trtllm",model_name="m"} 3\n'
    with pytest.raises(SpeculationNotEnabled):
        trtllm.open_window(parse_exposition(plain), None)


def _capture(*pages: str) -> Capture:
    snaps = tuple(Snapshot(1000.0 + 10 * i, parse_exposition(p)) for i, p in enumerate(pages))
    return Capture(snaps, "test", 10.0)


def test_a_counter_reset_splits_the_window_and_both_segments_count() -> None:
    # END, then a restart (counters back to START's values), then END again: two segments of 400 drafts
    obs = trtllm.analyse_window(_capture(START, END, START, END), None)
    assert obs.speculation.drafts == 800 and obs.speculation.accepted_tokens == 1240
    assert len(obs.segments) == 2 and obs.segments[1].reset_before


def test_accepted_above_drafted_is_refused() -> None:
    bad = END.replace('token_position="0"} 370.0', 'token_position="0"} 900.0')
    with pytest.raises(BadBodyFault):
        trtllm.analyse_window(_capture(START, bad), None)


def test_a_bad_position_label_is_refused() -> None:
    bad = END.replace('token_position="2"} 460.0', 'token_position="x"} 460.0')
    with pytest.raises(BadBodyFault):
        trtllm.analyse_window(_capture(START, bad), None)


def _totals_only(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "_drafted_tokens_" not in line
                     and "spec_decode_accepted_tokens_" not in line) + "\n"


def test_totals_only_need_k_and_give_the_mean_length() -> None:
    cap = _capture(_totals_only(START), _totals_only(END))  # deltas: 1200 draft tokens, 620 accepted
    with pytest.raises(ObserveUsageError):
        trtllm.analyse_window(cap, None)
    obs = trtllm.analyse_window(cap, None, num_speculative_tokens=3)
    assert obs.speculation.drafts == 400 and obs.speculation.accepted_tokens == 620
    assert obs.acceptance is not None and obs.acceptance.kind == "mean-length"


def test_recording_rules_name_its_counters() -> None:
    rules = trtllm.recording_rules("5m", 'job="trt"', "model_name", "instance")
    drafts = 'trtllm_spec_decode_drafted_tokens_total{job="trt", token_position="0"}'
    assert drafts in rules["acceptance_length"]
    assert "trtllm_spec_decode_accepted_tokens_total" in rules["acceptance_per_position"]


def test_a_bare_host_port_finds_the_prometheus_path() -> None:
    """trtllm-serve's /metrics is its JSON iteration-stats queue; given host:port alone, observe
    tries the exposition paths the engines declare and reads /prometheus/metrics."""
    stats = Reply(body='[{"iter": 7, "specDecodingStats": {"numDraftTokens": 3}}]',
                  content_type="application/json")
    srv = _serve([START, END])
    srv.paths["/metrics"] = stats
    with srv:
        bare = srv.url.removeprefix("http://").removesuffix(trtllm.METRICS_PATH)
        obs = observe_url(bare, **FAST)  # type: ignore[arg-type]
        with pytest.raises(BadBodyFault):  # a path given is a path meant
            observe_url(f"http://{bare}/metrics", **FAST)  # type: ignore[arg-type]
    assert obs.engine.name == "trtllm" and obs.speculation.drafts == 400
    assert obs.source.where.endswith("/prometheus/metrics")
