"""`spectune observe` on the real captured vLLM 0.32.0 scrape and SpecDecoding log lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from observe_support import FIXTURES, LOG, SCRAPE, fixture_text

from spectune.documents.exposition import parse_exposition
from spectune.documents.window import Capture, Snapshot
from spectune.engines.vllm import analyse, model_names
from spectune.engines.vllm.log import aggregate, parse_line, parse_log
from spectune.observe import detect_engine, observation_acceptance


@pytest.mark.parametrize("name", [SCRAPE, LOG])
def test_copies_equal_shared_fixtures(name: str, shared_dir: Path) -> None:
    """The copies under tests/fixtures/ are byte for byte the captured originals in ../shared
    (without ../shared: a skip that says so, a failure under CI)."""
    shared = shared_dir / "reference" / "fixtures" / name
    assert shared.is_file(), f"the ../shared beside the checkout lacks reference/fixtures/{name}"
    assert (FIXTURES / name).read_bytes() == shared.read_bytes()


def _since_start() -> Capture:
    """The fixture is cumulative since the server started: a window from an empty start
    (series absent → counted from 0) to the fixture."""
    empty = parse_exposition('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 0\n')
    end = parse_exposition(fixture_text(SCRAPE))
    return Capture((Snapshot(1000.0, empty), Snapshot(1010.0, end)), "fixture", 10.0)


def test_real_scrape_parses_with_prometheus_client() -> None:
    expo = parse_exposition(fixture_text(SCRAPE), "text/plain; version=0.0.4; charset=utf-8")
    assert detect_engine(expo) == "vllm"
    assert model_names(expo) == ["tiny-llama"]
    assert expo.total("vllm:spec_decode_num_drafts_total") == 96
    assert expo.total("vllm:spec_decode_num_draft_tokens_total") == 232
    assert expo.total("vllm:spec_decode_num_accepted_tokens_total") == 128
    per_pos = expo.get("vllm:spec_decode_num_accepted_tokens_per_pos_total")
    pos = {s.label("position"): s.value for s in per_pos}
    assert pos == {"0": 64, "1": 40, "2": 24}
    assert expo.types["vllm:iteration_tokens_total"] == "histogram"


def test_real_scrape_observation_numbers() -> None:
    obs = analyse(_since_start(), "tiny-llama")
    s = obs.speculation
    assert (s.drafts, s.draft_tokens, s.accepted_tokens, s.num_speculative_tokens) == (96, 232, 128, 3)
    assert s.mean_acceptance_length == pytest.approx(1 + 128 / 96)
    assert s.draft_acceptance_rate == pytest.approx(128 / 232)
    assert s.mean_draft_length == pytest.approx(232 / 96)  # < K: n-gram drafts can be short
    assert s.per_position is not None
    assert s.per_position.accepted == (64, 40, 24)
    assert s.per_position.marginal == pytest.approx((64 / 96, 40 / 96, 24 / 96))
    assert s.per_position.conditional == pytest.approx((64 / 96, 40 / 64, 24 / 40))
    acc = observation_acceptance(obs)
    assert acc.rates == pytest.approx((64 / 96, 40 / 64, 24 / 40))
    # the acceptance reproduces the measured tokens per verify exactly
    assert float(acc.expected_tokens(3)) == pytest.approx(1 + 128 / 96)
    assert "fixture" in acc.source and "96 drafts" in acc.source
    op = obs.operating_point
    assert op.prompt_tokens is not None and op.prompt_tokens.count == 4 and op.prompt_tokens.mean == 17
    assert op.generation_tokens is not None and op.generation_tokens.mean == 64
    assert op.iteration_tokens is not None and op.iteration_tokens.count == 132
    assert op.iteration_tokens.mean == pytest.approx(324 / 132)
    assert op.inter_token_latency_seconds is not None
    assert op.inter_token_latency_seconds.mean == pytest.approx(0.2058684279982117 / 128)
    assert any("shorter than K" in n for n in obs.notes)


def test_real_scrape_agrees_with_its_log_line() -> None:
    """The first captured log line covers the same traffic as the scrape."""
    first = parse_line(fixture_text(LOG).splitlines()[0])
    assert first is not None
    assert (first.accepted, first.drafted, first.rates) == (128, 232, (0.667, 0.417, 0.250))
    assert first.mean_length == 2.33 and first.avg_rate_percent == 55.2
    assert first.stamp == "11-22 23:46:33"
    drafts, exact = first.drafts_estimate()
    assert (drafts, exact) == (96, True)  # Drafted / K would say 77
    obs = analyse(_since_start(), "tiny-llama")
    assert obs.speculation.per_position is not None
    assert [round(m, 3) for m in obs.speculation.per_position.marginal] == list(first.rates)
    assert round(obs.speculation.mean_acceptance_length or 0, 2) == first.mean_length


def test_log_lines_aggregate_by_counts() -> None:
    records, bad = parse_log(fixture_text(LOG).splitlines())
    assert bad == 0 and len(records) == 2
    obs = aggregate(records, "fixture.log")
    s = obs.speculation
    second_drafts = round(3 / 0.002)  # 1500: the second line's accepted / sum of rates
    assert s.drafts == 96 + second_drafts
    assert s.accepted_tokens == 131 and s.draft_tokens == 232 + 3797
    assert s.per_position is not None
    assert sum(s.per_position.accepted) == pytest.approx(131)
    # weighted by counts, not a mean of the two lines' rates
    assert s.per_position.marginal[0] == pytest.approx((64 + 3) / (96 + second_drafts))
    assert s.mean_acceptance_length == pytest.approx(1 + 131 / (96 + second_drafts))
    assert obs.operating_point.running is None
    assert obs.operating_point.note and obs.operating_point.note.startswith("unknown")
    assert obs.window.seconds == pytest.approx(232 / 21.96 + 3797 / 379.67)
    assert obs.source.kind == "log"


def test_log_line_variants() -> None:
    assert parse_line("nothing here") is None
    truncated = "INFO 11-22 23:46:33 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.33"
    assert parse_line(truncated) is None
    records, bad = parse_log([truncated, fixture_text(LOG).splitlines()[0]])
    assert bad == 1 and len(records) == 1
    zero = ("INFO 11-23 08:00:00.123 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 1.00, "
            "Accepted throughput: 0.00 tokens/s, Drafted throughput: 30.00 tokens/s, Accepted: 0 tokens, "
            "Drafted: 300 tokens, Per-position acceptance rate: 0.000, 0.000, 0.000, "
            "Avg Draft acceptance rate: 0.0%")
    rec = parse_line(zero)
    assert rec is not None and rec.drafts_estimate() == (100, False)
    assert rec.stamp == "11-23 08:00:00.123"
    obs = aggregate([rec], "x")
    assert obs.acceptance.conditional == (0.0, 0.0, 0.0)
    assert any("full length" in n for n in obs.notes)


def test_a_proxy_showing_two_engines_is_read_as_the_one_that_speculates() -> None:
    """detect_engine goes by each engine's metric prefix; a page carrying both (a proxy
    aggregating servers) is the engine whose speculative metric is on it, else the first."""
    from observe_support import Engine, sglang_text, vllm_text

    from spectune.base.errors import SpeculationNotEnabled
    vllm_spec = fixture_text(SCRAPE)
    vllm_plain = vllm_text(Engine(running=1), spec=False)
    sglang = sglang_text(2.5, 0.5)
    sglang_plain = "\n".join(ln for ln in sglang.splitlines() if "spec_accept" not in ln) + "\n"
    assert detect_engine(parse_exposition(sglang)) == "sglang"
    assert detect_engine(parse_exposition(vllm_plain + sglang)) == "sglang"
    assert detect_engine(parse_exposition(vllm_spec + sglang_plain)) == "vllm"
    assert detect_engine(parse_exposition(vllm_plain + sglang_plain)) == "vllm"
    with pytest.raises(SpeculationNotEnabled, match="no vllm: or sglang: or trtllm_ metrics"):
        detect_engine(parse_exposition("python_info 1.0\n"))
