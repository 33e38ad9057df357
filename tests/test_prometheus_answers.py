"""Malformed and inconsistent Prometheus HTTP API answers (issue 19, item 2): a real HTTP server
on 127.0.0.1 answers every query of `observe --prometheus` as a Prometheus holding one vLLM
pod would, except the one answer a case corrupts. Each corrupt answer must end in exit 5 and
one line on stderr naming the query and what was wrong -- the same for `recommend --prometheus`
and `fleet` -- and inconsistent counts are refused by the very function that refuses them on
the /metrics path (spectune.documents.counts.check_counts)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from observe_support import Engine, MetricsServer, Reply, vllm_text
from test_observe_prometheus_api import Answer, fake_prometheus

from spectune.base.errors import BadBodyFault
from spectune.cli.main import cli

AT = 1795442400.0  # the window's end (--at), Unix seconds
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
RUNNING = "vllm:num_requests_running"
POD = {"model_name": "tiny-llama", "pod": "vllm-0"}
#: one pod over the window: 100 drafts of 3 tokens, 80/50/20 accepted at positions 1..3
GOOD = {DRAFTS: 100.0, DRAFT_TOKENS: 300.0, ACCEPTED: 150.0}
GOOD_POS = (80.0, 50.0, 20.0)
Q_DRAFTS = f"increase({DRAFTS}{{}}[300s])"
Q_PER_POS = f"increase({PER_POS}{{}}[300s])"
Q_RESETS = f"resets({DRAFTS}{{}}[300s])"
Q_RUNNING = f"{RUNNING}{{}}"
Series = dict[str, Any]
Fix = Callable[[list[Series]], Any]  # the good result list -> a corrupt result list, or a whole body


def metric_of(query: str) -> str:
    inner = query.removeprefix("increase(").removeprefix("resets(")
    return inner.split("{", 1)[0]


def good_result(path: str, form: dict[str, str], per_pos: tuple[float, ...] = GOOD_POS,
                counts: dict[str, float] | None = None) -> tuple[str, list[Series]]:
    """(resultType, result) a Prometheus holding one vLLM pod answers to this query."""
    query, counts = form["query"], counts or GOOD
    if path.endswith("query_range"):
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        if metric_of(query) != RUNNING:
            return "matrix", []
        n = round((end - start) / step)
        return "matrix", [{"metric": {"__name__": RUNNING, **POD},
                           "values": [[start + i * step, "2"] for i in range(n + 1)]}]
    t = float(form["time"])
    name = metric_of(query)
    if query.startswith("resets("):
        return "vector", [{"metric": POD, "value": [t, "0"]}] if name == DRAFTS else []
    if name in counts:
        return "vector", [{"metric": POD, "value": [t, repr(counts[name])]}]
    if name == PER_POS:
        return "vector", [{"metric": {**POD, "position": str(i)}, "value": [t, repr(v)]}
                          for i, v in enumerate(per_pos)]
    return "vector", []


def prometheus(target: str, fix: Fix) -> Callable[[str, dict[str, str]], Answer]:
    """Answers every query well, the one whose text is ``target`` through ``fix``."""
    def answer(path: str, form: dict[str, str]) -> Answer:
        kind, result = good_result(path, form)
        if form["query"] == target:
            fixed = fix(result)
            if isinstance(fixed, str):
                return 200, "application/json", fixed
            result = fixed
        return 200, "application/json", json.dumps({"status": "success",
                                                    "data": {"resultType": kind, "result": result}})
    return answer


def observe(url: str, *extra: str) -> Any:
    return CliRunner().invoke(cli, ["observe", "--prometheus", url, "--window", "5m", "--interval", "60",
                                    "--at", f"{AT:.0f}", "--timeout", "10", *extra])


def one_line(r: Any, code: int) -> str:
    assert r.exit_code == code, (r.exit_code, r.stderr, r.stdout[-500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectune: error: "), r.stderr[:2000]
    assert "Traceback" not in r.output
    return lines[0]


# --------------------------------------------------------------------------- corrupt answers
def set_value(v: Any) -> Fix:
    return lambda res: [{**res[0], "value": v}]


def drop(key: str) -> Fix:
    return lambda res: [{k: x for k, x in res[0].items() if k != key}]


def sample(v: Any) -> Fix:
    return lambda res: [{**res[0], "value": [res[0]["value"][0], v]}]


def stamp(t: Any) -> Fix:
    return lambda res: [{**res[0], "value": [t, res[0]["value"][1]]}]


def label(v: Any) -> Fix:
    return lambda res: [{**res[0], "metric": {**res[0]["metric"], "pod": v}}]


def raw(text: str) -> Fix:
    return lambda res: text


def points(change: Callable[[list[Any]], Any]) -> Fix:
    return lambda res: [{**res[0], "values": change(res[0]["values"])}]


def nan_time(res: list[Series]) -> str:  # JSON has no NaN; Python's parser (and a hostile server) do
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {**res[0], "value": [float("nan"), "100"]}]}})


DEEP = 100_000
MALFORMED: list[tuple[str, str, Fix, str]] = [
    # (case, the query answered badly, how, words of the message)
    ("value-missing", Q_DRAFTS, drop("value"), "is null; expected [time"),
    ("value-short", Q_DRAFTS, set_value([AT]), "a list of 1 item(s)"),
    ("value-empty", Q_DRAFTS, set_value([]), "a list of 0 item(s)"),
    ("value-long", Q_DRAFTS, set_value([AT, "1", "2"]), "a list of 3 item(s)"),
    ("value-null", Q_DRAFTS, set_value(None), "is null; expected [time"),
    ("value-scalar", Q_DRAFTS, set_value(100), "is 100; expected [time"),
    ("value-string", Q_DRAFTS, set_value("100"), "is '100'; expected [time"),
    ("value-mapping", Q_DRAFTS, set_value({"t": AT}), "is a mapping; expected [time"),
    ("sample-text", Q_DRAFTS, sample("many"), "is 'many'; expected a number"),
    ("sample-null", Q_DRAFTS, sample(None), "is null; expected a number"),
    ("sample-bool", Q_DRAFTS, sample(True), "is a boolean"),
    ("sample-list", Q_DRAFTS, sample([1]), "is a list; expected a number"),
    ("sample-nan", Q_DRAFTS, sample("NaN"), "is nan; expected a finite number"),
    ("sample-inf", Q_DRAFTS, sample("+Inf"), "is inf; expected a finite number"),
    ("sample-minus-inf", Q_DRAFTS, sample("-Inf"), "is -inf; expected a finite number"),
    ("sample-negative", Q_DRAFTS, sample("-5"), "is -5; expected a count"),
    ("sample-1e300", Q_DRAFTS, sample("1e300"), "is 1e+300; expected a count"),
    ("time-nan", Q_DRAFTS, nan_time, "has the time nan"),
    ("time-inf", Q_DRAFTS, stamp(1e999), "has the time inf"),
    ("time-1e300", Q_DRAFTS, stamp(1e300), "not the time asked"),
    ("time-negative", Q_DRAFTS, stamp(-1), "not the time asked"),
    ("time-400-digits", Q_DRAFTS, stamp(10**400), "has the time 1000000000"),
    ("sample-400-digits", Q_DRAFTS, sample(10**400), "is inf; expected a finite number"),
    ("time-text", Q_DRAFTS, stamp("now"), "has the time 'now'"),
    ("time-null", Q_DRAFTS, stamp(None), "has the time null"),
    ("metric-missing", Q_DRAFTS, drop("metric"), "metric is null"),
    ("metric-list", Q_DRAFTS, lambda res: [{**res[0], "metric": ["pod"]}], "metric is a list"),
    ("series-text", Q_DRAFTS, lambda res: ["series"], "a series is 'series'"),
    ("label-mapping", Q_DRAFTS, label({"a": 1}), "the label 'pod' is a mapping"),
    ("label-list", Q_DRAFTS, label(["a"]), "the label 'pod' is a list"),
    ("label-number", Q_DRAFTS, label(7), "the label 'pod' is 7"),
    ("label-null", Q_DRAFTS, label(None), "the label 'pod' is null"),
    ("label-3MB", Q_DRAFTS, label("p" * 3_000_000), "3,000,000 characters"),
    ("deep-json", Q_DRAFTS, raw('{"status": "success", "data": ' + "[" * DEEP + "]" * DEEP + "}"),
     "nested too deeply"),
    ("50000-groups", Q_DRAFTS, lambda res: [{"metric": {"model_name": f"m{i}"}, "value": res[0]["value"]}
                                           for i in range(50_000)], "more than 10,000 groups"),
    ("duplicate-drafts", Q_DRAFTS, lambda res: res * 2, "appears twice in one answer"),
    ("three-series-position-0", Q_PER_POS, lambda res: [res[0], res[0], res[0], *res[1:]],
     "appears twice in one answer"),
    ("resets-nan", Q_RESETS, sample("NaN"), "expected a finite number"),
    ("resets-inf", Q_RESETS, sample("Inf"), "expected a finite number"),
    ("resets-1e300", Q_RESETS, sample("1e300"), "is 1e+300; expected a whole number"),
    ("resets-negative", Q_RESETS, sample("-1"), "is -1; expected a whole number"),
    ("resets-fraction", Q_RESETS, sample("2.5"), "is 2.5; expected a whole number"),
    ("range-values-missing", Q_RUNNING, drop("values"), "values of the series"),
    ("range-values-text", Q_RUNNING, points(lambda v: "2"), "values of the series"),
    ("range-point-short", Q_RUNNING, points(lambda v: [[v[0][0]], *v[1:]]), "a list of 1 item(s)"),
    ("range-point-null", Q_RUNNING, points(lambda v: [None, *v[1:]]), "is null; expected [time"),
    ("range-value-text", Q_RUNNING, points(lambda v: [[v[0][0], "x"], *v[1:]]), "is 'x'; expected a number"),
    ("range-value-nan", Q_RUNNING, points(lambda v: [[v[0][0], "NaN"], *v[1:]]), "expected a finite number"),
    ("range-time-inf", Q_RUNNING, points(lambda v: [[1e999, "2"], *v[1:]]), "has the time inf"),
    ("range-time-1e300", Q_RUNNING, points(lambda v: [*v, [1e300, "2"]]), "not one of the steps asked"),
    ("range-time-repeated", Q_RUNNING, points(lambda v: [v[0], *v]), "not after the one before"),
    ("range-label-mapping", Q_RUNNING, label({"a": "b"}), "the label 'pod' is a mapping"),
    ("range-duplicate", Q_RUNNING, lambda res: res * 3, "appears twice in one answer"),
]


@pytest.mark.parametrize(("target", "fix", "says"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_answer_is_exit_5_naming_the_query(target: str, fix: Fix, says: str) -> None:
    with fake_prometheus(prometheus(target, fix)) as (url, _):
        line = one_line(observe(url), 5)
    assert f"the answer to {target!r}" in line and says in line, line
    assert len(line) < 600  # a 3 MB label is not echoed


@pytest.mark.parametrize("command", ["recommend", "fleet"])
@pytest.mark.parametrize("case", ["three-series-position-0", "value-string", "resets-1e300", "label-mapping"])
def test_recommend_and_fleet_refuse_them_too(command: str, case: str, tmp_path: Path) -> None:
    _, target, fix, says = next(m for m in MALFORMED if m[0] == case)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("by: [pod]\ndeployments:\n"
                     "  - {match: {pod: vllm-0}, profile: llama-3.1-8b-h100-ngram}\n")
    with fake_prometheus(prometheus(target, fix)) as (url, _):
        args = ["recommend", "llama-3.1-8b-h100-ngram"] if command == "recommend" else ["fleet", str(fleet)]
        r = CliRunner().invoke(cli, [*args, "--prometheus", url, "--window", "5m", "--interval", "60",
                                     "--at", f"{AT:.0f}"])
    line = one_line(r, 5)
    assert f"the answer to {target!r}" in line and says in line, line


# --------------------------------------------------------------------------- inconsistent counts
Server = Callable[[str, dict[str, str]], Answer]


def counts_prometheus(counts: dict[str, float], per_pos: tuple[float, ...]) -> Server:
    def answer(path: str, form: dict[str, str]) -> Answer:
        kind, result = good_result(path, form, per_pos, counts)
        return 200, "application/json", json.dumps({"status": "success",
                                                    "data": {"resultType": kind, "result": result}})
    return answer


def metrics_pages(counts: dict[str, float], per_pos: tuple[float, ...]) -> Callable[[int], Reply]:
    """A /metrics server whose counters grow by ``counts`` between its first scrape and the rest."""
    def page(n: int) -> Reply:
        k = 0 if n == 0 else 1
        e = Engine(drafts=counts[DRAFTS] * k, draft_tokens=counts[DRAFT_TOKENS] * k,
                   accepted=counts[ACCEPTED] * k, per_pos=tuple(p * k for p in per_pos), running=2)
        return Reply(body=vllm_text(e))
    return page


BAD_COUNTS = [
    ("position-above-drafts", GOOD, (300.0, 50.0, 20.0)),
    ("accepted-above-drafted", {**GOOD, ACCEPTED: 500.0}, (90.0, 90.0, 90.0)),
]


@pytest.mark.parametrize(("counts", "per_pos"), [b[1:] for b in BAD_COUNTS], ids=[b[0] for b in BAD_COUNTS])
def test_prometheus_and_metrics_refuse_the_same_counts_in_the_same_words(
        counts: dict[str, float], per_pos: tuple[float, ...]) -> None:
    from spectune.documents.counts import Counts, check_counts  # imported here: absent before issue 19

    with pytest.raises(BadBodyFault) as refused:
        check_counts(Counts(counts[DRAFTS], counts[DRAFT_TOKENS], counts[ACCEPTED], per_pos), "WHERE")
    words = refused.value.message.removeprefix("WHERE: ")
    with fake_prometheus(counts_prometheus(counts, per_pos)) as (url, _):
        via_prometheus = one_line(observe(url), 5)
    with MetricsServer(metrics_pages(counts, per_pos)) as srv:
        via_metrics = one_line(CliRunner().invoke(cli, ["observe", srv.url, "--window", "0.6",
                                                        "--interval", "0.3"]), 5)
    assert via_prometheus.endswith(words) and via_metrics.endswith(words), (via_prometheus, via_metrics)
    assert 'model_name="tiny-llama"' in via_prometheus and srv.url in via_metrics


def test_recommend_prometheus_refuses_position_0_counted_three_times() -> None:
    """The issue's case: three series for position 0 (differently labelled, so no duplicate in
    one answer) made `recommend --prometheus` answer gamma 8 at 7.43x with exit 0."""
    def answer(path: str, form: dict[str, str]) -> Answer:
        kind, result = good_result(path, form)
        if form["query"] == Q_PER_POS:
            result = [*result, *({"metric": {**POD, "position": "0", "instance": f"copy-{i}"},
                                  "value": result[0]["value"]} for i in range(2))]
        return 200, "application/json", json.dumps({"status": "success",
                                                    "data": {"resultType": kind, "result": result}})
    with fake_prometheus(answer) as (url, _):
        r = CliRunner().invoke(cli, ["recommend", "llama-3.1-8b-h100-ngram", "--prometheus", url,
                                     "--window", "5m", "--interval", "60", "--at", f"{AT:.0f}"])
    line = one_line(r, 5)
    assert "240 accepted at position 1 but 100 drafts" in line, line


def test_extrapolation_within_the_slack_is_clamped_and_said() -> None:
    """increase() can put position 1 a little above drafts (each series extrapolated alone):
    within 10% it is clamped, with a note, instead of refused."""
    with fake_prometheus(counts_prometheus(GOOD, (104.0, 50.0, 20.0))) as (url, _):
        r = observe(url, "-o", "json")
    assert r.exit_code == 0, r.stderr
    (g,) = json.loads(r.stdout)["groups"]
    assert g["speculation"]["per_position"]["accepted"] == [100, 50, 20]
    assert any("clamped" in n for n in g["notes"])


def test_drafts_without_per_position_series_give_mean_length_acceptance() -> None:
    """A group with the drafts counters but no per-position series: acceptance from the mean
    length (i.i.d. alpha), said in a note -- the /metrics path likewise."""
    with fake_prometheus(counts_prometheus(GOOD, ())) as (url, _):
        r = observe(url, "-o", "json")
    assert r.exit_code == 0, r.stderr
    (g,) = json.loads(r.stdout)["groups"]
    assert g["acceptance"]["kind"] == "mean-length" and g["speculation"]["num_speculative_tokens"] == 3
    assert g["speculation"]["per_position"] is None
    assert any("no vllm:spec_decode_num_accepted_tokens_per_pos_total series" in n for n in g["notes"])
    with MetricsServer(metrics_pages(GOOD, ())) as srv:
        r = CliRunner().invoke(cli, ["observe", srv.url, "--window", "0.6", "--interval", "0.3",
                                     "-o", "json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["acceptance"]["kind"] == "mean-length"


def test_a_bucket_bound_that_is_no_number_is_refused_on_both_paths() -> None:
    """A histogram bucket with le="abc" (neither parser checks it) ended in exit 70 on both
    paths; now the histogram delta both share refuses it in the same words."""
    bucket = "vllm:iteration_tokens_total_bucket"

    def answer(path: str, form: dict[str, str]) -> Answer:
        kind, result = good_result(path, form)
        name = metric_of(form["query"])
        if name.startswith("vllm:iteration_tokens_total"):
            extra = {"le": "abc"} if name == bucket else {}
            result = [{"metric": {**POD, **extra}, "value": [float(form["time"]), "5"]}]
        return 200, "application/json", json.dumps({"status": "success",
                                                    "data": {"resultType": kind, "result": result}})

    def page(n: int) -> Reply:
        e = Engine(drafts=100.0 * n, draft_tokens=300.0 * n, accepted=150.0 * n,
                   per_pos=(80.0 * n, 50.0 * n, 20.0 * n), iteration=(5.0 * n, 10.0 * n))
        return Reply(body=vllm_text(e).replace(f'{bucket}{{engine="0",model_name="tiny-llama",le="1.0"}}',
                                               f'{bucket}{{engine="0",model_name="tiny-llama",le="abc"}}'))

    words = f"{bucket} has le='abc'; expected a bucket bound (a number or +Inf)"
    with fake_prometheus(answer) as (url, _):
        assert one_line(observe(url), 5).endswith(words)
    with MetricsServer(page) as srv:
        assert one_line(CliRunner().invoke(cli, ["observe", srv.url, "--window", "0.6", "--interval", "0.3"]),
                        5).endswith(words)
