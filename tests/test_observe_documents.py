"""The Observation document: YAML/JSON round trip, load errors, the operating point handed to
recommend, `--log -`, vLLM V0 metric names, and the recommend hook."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from observe_support import FIXTURES, LOG, SCRAPE, fixture_text

from spectune.base.errors import ObserveUsageError
from spectune.cli.main import cli
from spectune.documents.exposition import parse_exposition
from spectune.documents.observation import Observation, observation_from_dict
from spectune.documents.window import Capture, Snapshot
from spectune.engines.vllm import analyse
from spectune.observe import load_observation, observation_acceptance, observation_operating_point
from spectune.render.formats import render


def _fixture_observation() -> Observation:
    empty = parse_exposition('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 2\n')
    end = parse_exposition(fixture_text(SCRAPE))
    return analyse(Capture((Snapshot(1795391183.0, empty), Snapshot(1795391243.5, end)),
                           "http://127.0.0.1:8000/metrics", 5.0, engine_version="0.32.0"), "tiny-llama")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip(tmp_path: Path, fmt: str) -> None:
    obs = _fixture_observation()
    text = render(obs.to_dict(), fmt)
    path = tmp_path / f"obs.{fmt}"
    path.write_text(text)
    back = load_observation(path)
    assert render(back.to_dict(), fmt) == text  # byte-identical after a round trip
    assert back.speculation.per_position is not None
    assert back.speculation.per_position.accepted == (64, 40, 24)
    assert observation_acceptance(back).rates == pytest.approx(observation_acceptance(obs).rates, abs=1e-6)
    assert back.window.start == "2026-11-22T23:46:23.000Z"
    assert back.engine.version == "0.32.0"


def test_document_shape() -> None:
    doc = _fixture_observation().to_dict()
    assert list(doc)[:3] == ["apiVersion", "kind", "schema"]
    assert (doc["apiVersion"], doc["kind"], doc["schema"]) == ("spectune/v1", "Observation", 1)
    assert doc["speculation"]["per_position"]["accepted"] == [64, 40, 24]
    assert doc["speculation"]["drafts"] == 96 and isinstance(doc["speculation"]["drafts"], int)
    hist = doc["operating_point"]["prompt_tokens"]
    assert hist["count"] == 4 and hist["buckets"][-1] == {"le": 1000, "count": 4}  # +Inf left out
    json.dumps(doc)  # plain types only


def test_operating_point_for_recommend() -> None:
    point = observation_operating_point(_fixture_observation())
    assert point["batch_sizes"] == [2] and point["batch_weights"] == [1.0]
    assert point["idle_fraction"] == pytest.approx(0.5) and point["mean_running"] == 1.0
    # issue 9 (deliberate change): the context while decoding, prompt + half the generation
    assert point["context_lengths"] == [17 + 32] and point["mean_context_tokens"] == 49
    log_point = observation_operating_point(load_log_observation())
    assert log_point["batch_sizes"] == [] and log_point["context_lengths"] == []
    assert any("unknown" in n for n in log_point["notes"])


def load_log_observation() -> Observation:
    from spectune.observe.log import observe_log

    return observe_log(FIXTURES / LOG)


@pytest.mark.parametrize("mutate,says", [
    (lambda d: d.update(kind="Recommendation"), "kind: expected 'Observation'"),
    (lambda d: d.update(schema=99), "schema: this spectune reads Observation schema 1"),
    (lambda d: d["speculation"].pop("basis"), "speculation.basis: missing"),
    (lambda d: d["acceptance"].update(conditional=[1.5]), "acceptance.conditional"),
    (lambda d: d["window"].update(samples="many"), "window.samples: expected a whole number"),
])
def test_load_errors_name_the_key(tmp_path: Path, mutate, says: str) -> None:  # type: ignore[no-untyped-def]
    doc = _fixture_observation().to_dict()
    mutate(doc)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ObserveUsageError, match=says) as err:
        load_observation(path)
    assert str(path) in err.value.message and err.value.exit_code == 2


def test_load_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: [1, 2\n")
    with pytest.raises(ObserveUsageError, match="not YAML or JSON"):
        load_observation(path)
    with pytest.raises(ObserveUsageError, match="cannot read observation file"):
        load_observation(tmp_path / "missing.yaml")
    with pytest.raises(ObserveUsageError, match="expected a mapping"):
        observation_from_dict([1, 2], "list.yaml")


def test_log_from_stdin_through_cli() -> None:
    res = CliRunner().invoke(cli, ["observe", "--log", "-", "-o", "json"], input=fixture_text(LOG))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["source"] == {"kind": "log", "where": "stdin"}
    assert doc["speculation"]["accepted_tokens"] == 131
    empty = CliRunner().invoke(cli, ["observe", "--log", "-"], input="INFO nothing to see\n")
    assert empty.exit_code == 6 and "no 'SpecDecoding metrics' lines" in empty.stderr
    missing = CliRunner().invoke(cli, ["observe", "--log", "/no/such.log"])
    assert missing.exit_code == 2


def test_vllm_v0_metric_names() -> None:
    """V0: accepted/draft/emitted counters and acceptance gauges, no per-position data."""
    def page(accepted: float, draft: float, emitted: float) -> str:
        return "\n".join([
            "# TYPE vllm:spec_decode_draft_acceptance_rate gauge",
            'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.6',
            "# TYPE vllm:spec_decode_efficiency gauge",
            'vllm:spec_decode_efficiency{model_name="m"} 0.5',
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}',
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            f'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {draft}',
            "# TYPE vllm:spec_decode_num_emitted_tokens_total counter",
            f'vllm:spec_decode_num_emitted_tokens_total{{model_name="m"}} {emitted}',
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="m"} 4', ""])
    # 100 drafts of K = 4: 400 draft tokens, 240 accepted, 340 emitted (one extra token per verify)
    cap = Capture((Snapshot(0.0, parse_exposition(page(1000, 2000, 1500))),
                   Snapshot(60.0, parse_exposition(page(1240, 2400, 1840)))), "v0", 5.0)
    obs = analyse(cap, "m")
    s = obs.speculation
    assert (s.drafts, s.num_speculative_tokens, s.accepted_tokens) == (100, 4, 240)
    assert s.mean_acceptance_length == pytest.approx(3.4)
    assert s.per_position is None and "no per-position" in (s.per_position_note or "")
    acc = observation_acceptance(obs)
    assert float(acc.expected_tokens(4)) == pytest.approx(3.4)
    assert obs.acceptance.kind == "mean-length"


def test_recommend_takes_the_observation(tmp_path: Path) -> None:
    obs = _fixture_observation()
    path = tmp_path / "obs.yaml"
    path.write_text(render(obs.to_dict(), "yaml"))
    examples = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))
    if not examples:
        pytest.skip("no shipped example deployment")
    res = CliRunner().invoke(cli, ["recommend", str(examples[0]), "--observed", str(path), "-o", "yaml"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(res.stdout)
    assert "127.0.0.1:8000" in json.dumps(doc)  # the acceptance source names the observed server


def test_documents_validate_against_the_published_schema() -> None:
    """Every Observation shape (V1 scrape, log, V0, SGLang) matches `spectune schema Observation`."""
    jsonschema = pytest.importorskip("jsonschema")
    from observe_support import sglang_text

    from spectune.documents.schema import schema_for
    from spectune.engines import sglang

    validator = jsonschema.Draft202012Validator(schema_for("Observation"))
    sg = Capture((Snapshot(0.0, parse_exposition(sglang_text(2.2, 0.4))),
                  Snapshot(5.0, parse_exposition(sglang_text(2.4, 0.45)))), "sglang", 1.0)
    for obs in (_fixture_observation(), load_log_observation(), sglang.analyse(sg, "qwen")):
        doc = json.loads(render(obs.to_dict(), "json"))
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, errors


# --------------------------------------------------------------------------- review fixes
def _set(path: str, value: object):  # type: ignore[no-untyped-def]
    """A mutation setting ``a.b[0].c`` of the document to ``value``."""
    import re

    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]

    def mutate(doc: dict) -> None:  # type: ignore[type-arg]
        node = doc
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


RUNNING0 = "operating_point.running.distribution[0]"


@pytest.mark.parametrize("path,value,says", [
    ("operating_point.prompt_tokens.buckets", 5, "operating_point.prompt_tokens.buckets: expected a list"),
    (f"{RUNNING0}.running", 1e300, f"{RUNNING0}.running: expected a finite number"),
    (f"{RUNNING0}.running", 10 ** 400, f"{RUNNING0}.running: expected a finite number"),
    (f"{RUNNING0}.running", 2.5, f"{RUNNING0}.running: expected a whole number"),
    (f"{RUNNING0}.running", -1, f"{RUNNING0}.running: expected a number >= 0"),
    (f"{RUNNING0}.samples", 0, f"{RUNNING0}.samples: expected a number >= 1"),
    ("operating_point.running.samples", 7, "operating_point.running.samples: 7, but the distribution"),
    ("operating_point.running.distribution", {"a": 1}, "running.distribution: expected a list"),
    ("operating_point.prompt_tokens.mean", 1e300, "prompt_tokens.mean: expected a finite number"),
    ("operating_point.prompt_tokens.count", float("inf"), "prompt_tokens.count: expected a finite"),
    ("window.samples", 1e300, "window.samples: expected a finite number"),
    ("speculation.num_speculative_tokens", 1.5, "num_speculative_tokens: expected a whole number"),
    ("speculation.per_position.accepted", 3, "per_position.accepted: expected a list"),
    ("speculation.per_position.marginal", [0.5], "one entry per position"),
    ("speculation.per_position.conditional[1]", "x", "conditional[1]: expected a number"),
    ("acceptance.conditional", "0.5", "acceptance.conditional: expected a list"),
    ("acceptance.conditional", [float("nan")], "acceptance.conditional[0]: expected a finite"),
    ("segments", {"start": 0}, "segments: expected a list"),
    ("notes", 5, "notes: expected a list"),
    ("notes", [{"a": 1}], "notes[0]: expected text"),
])
def test_bad_types_and_bounds_are_input_errors(tmp_path: Path, path: str, value: object, says: str) -> None:
    """`buckets: 5` was a TypeError, `running: 1e300` an OverflowError in recommend."""
    doc = _fixture_observation().to_dict()
    _set(path, value)(doc)
    files = {"bad.yaml": yaml.safe_dump(doc)}
    if all(math.isfinite(x) for x in _floats(doc)):  # JSON has no NaN / Infinity
        files["bad.json"] = json.dumps(doc)
    for name, text in files.items():
        file = tmp_path / name
        file.write_text(text)
        with pytest.raises(ObserveUsageError) as err:
            load_observation(file)
        assert says in err.value.message
        # file:line: for YAML (the line of the key), file: for JSON
        where = re.escape(str(file)) + (r":\d+: " if name.endswith(".yaml") else ": ")
        assert re.match(where, err.value.message)
        assert err.value.exit_code == 2


def _floats(node: object) -> list[float]:
    if isinstance(node, float):
        return [node]
    if isinstance(node, dict):
        node = list(node.values())
    return [x for v in node for x in _floats(v)] if isinstance(node, list) else []


@pytest.mark.parametrize("path,value", [("operating_point.prompt_tokens.buckets", 5),
                                        (f"{RUNNING0}.running", 1e300)])
def test_recommend_with_a_bad_observation_exits_2(tmp_path: Path, path: str, value: object) -> None:
    doc = _fixture_observation().to_dict()
    _set(path, value)(doc)
    file = tmp_path / "obs.yaml"
    file.write_text(yaml.safe_dump(doc))
    example = Path(__file__).parents[1] / "examples" / "llama-3.1-70b-h100-eagle3.yaml"
    res = CliRunner().invoke(cli, ["recommend", str(example), "--observed", str(file)])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spectune: error: ") and str(file) in err[0]
    assert path.rsplit(".", 1)[-1] in err[0] and res.stdout == ""


def test_load_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ObserveUsageError, match="not UTF-8"):
        load_observation(path)


def test_table_without_interval() -> None:
    """Adjacent f-strings joined before the conditional: the window line became ')'."""
    from dataclasses import replace

    obs = _fixture_observation()
    doc = replace(obs, window=replace(obs.window, interval_seconds=None)).to_dict()
    lines = render(doc, "table").splitlines()
    window = [ln for ln in lines if ln.startswith("window ")]
    assert window == ["window 2026-11-22T23:46:23.000Z .. 2026-11-22T23:47:23.500Z (60.5 s, 2 samples)"]
    assert ")" not in [ln.strip() for ln in lines]
    with_interval = render(obs.to_dict(), "table")
    assert "(60.5 s, 2 samples, every 5 s)" in with_interval


def _log_line(accepted: int, drafted: int, rates: str) -> str:
    return (f"INFO 11-23 08:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 1.00, "
            f"Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: {accepted} "
            f"tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, "
            "Avg Draft acceptance rate: 0.0%\n")


def test_log_without_drafts_is_no_speculative_traffic() -> None:
    """Lines with 0 drafts used to give exit 0 and a = [0, 0, 0]; /metrics gives exit 6."""
    from spectune.base.errors import NoSpeculativeTraffic
    from spectune.engines.vllm.log import aggregate, parse_log

    text = _log_line(0, 0, "0.000, 0.000, 0.000") * 3
    res = CliRunner().invoke(cli, ["observe", "--log", "-", "-o", "json"], input=text)
    assert res.exit_code == 6, res.output
    assert "0 drafted tokens" in res.stderr and res.stdout == ""
    with pytest.raises(NoSpeculativeTraffic, match="3 SpecDecoding line"):
        aggregate(parse_log(text.splitlines())[0], "x.log")


def test_log_accepted_tokens_with_rates_rounding_to_zero() -> None:
    """Accepted: 3 with rates 0.000 used to vanish from the per-position counts."""
    text = _log_line(3, 3000, "0.000, 0.000, 0.000") + _log_line(8, 30, "0.500, 0.300, 0.000")
    res = CliRunner().invoke(cli, ["observe", "--log", "-", "-o", "json"], input=text)
    assert res.exit_code == 0, res.output
    spec = json.loads(res.stdout)["speculation"]
    assert spec["accepted_tokens"] == 11
    assert spec["per_position"]["accepted"] == [3 + 5, 3, 0]
    assert sum(spec["per_position"]["accepted"]) == spec["accepted_tokens"]
    notes = json.loads(res.stdout)["notes"]
    assert any("1 line(s) report 3 accepted token(s)" in n and "position 1" in n for n in notes)
    assert not any("had no accepted token" in n for n in notes)


def test_operating_point_source_is_the_document_s() -> None:
    """The source is already redacted when written: a log path is not a URL to redact again."""
    from dataclasses import replace

    from spectune.documents.observation import Source

    obs = replace(load_log_observation(), source=Source("log", "//ops@nas/logs/vllm.log"))
    assert observation_operating_point(obs)["source"] == "log //ops@nas/logs/vllm.log"


def test_json_exponents_load_as_numbers(tmp_path: Path) -> None:
    """json writes 1e-06 without a dot, which YAML 1.1 reads as text: JSON is read as JSON."""
    from dataclasses import replace

    from spectune.documents.observation import HistogramSummary

    obs = _fixture_observation()
    itl = HistogramSummary(3, 3e-06, 1e-06, ((1e-06, 3),))
    op = replace(obs.operating_point, inter_token_latency_seconds=itl)
    text = render(replace(obs, operating_point=op).to_dict(), "json")
    assert "1e-06" in text
    path = tmp_path / "obs.json"
    path.write_text(text)
    back = load_observation(path)
    assert back.operating_point.inter_token_latency_seconds == itl
    assert render(back.to_dict(), "json") == text
