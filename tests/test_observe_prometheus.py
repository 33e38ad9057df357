"""`spectune observe --prometheus` against a REAL Prometheus server (Debian's package) that
scrapes four loopback exporters replaying the real vLLM 0.32.0 scrape: two replicas of two
deployments, one replica restarted (counters back to 0) in the middle of the window.

Marked `prometheus` (deselected by default; scripts/ci_prometheus.sh installs Prometheus and
runs them); skipped when the binary is absent.

The independent computation: the raw samples Prometheus stored in the window (a range
selector, checked to be values the exporters served) go through Prometheus's documented
increase() (a counter that falls restarted from 0; the result is extrapolated to the window's
edges: promql/functions.go extrapolatedRate, Prometheus 2.x), written out below, then are
summed per deployment; running requests are the latest sample at each step time, summed.
spectune's per-group results must equal those.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from observe_support import MetricsServer, Reply, closed_port, sglang_text
from prometheus_support import (
    SPEC,
    TICK,
    PrometheusServer,
    ReplayExporter,
    Traffic,
    all_served,
    prometheus_binary,
    prometheus_increase,
    wait_until,
)

from spectune.cli.main import cli

pytestmark = pytest.mark.prometheus

WINDOW = 20  # seconds
RESTART_INTO_WINDOW = 10.0  # seconds after the window's start
PODS = {  # pod -> (deployment, model, traffic per tick)
    "chat-0": ("chat", "tiny-llama", Traffic(4, 12, (3, 2, 1), 40, 90, 4, 2.5, 0.02, (1, 2, 3, 4))),
    "chat-1": ("chat", "tiny-llama", Traffic(6, 17, (4, 2, 1), 200, 30, 6, 1.5, 0.03, (2, 2, 6))),
    "code-0": ("code", "tiny-llama-code", Traffic(5, 15, (4, 3, 2), 700, 300, 5, 3.0, 0.05, (0, 1, 5))),
    "code-1": ("code", "tiny-llama-code", Traffic(3, 9, (3, 3, 2), 900, 120, 3, 3.5, 0.04, (3, 4))),
}
RESTARTED = "code-1"
SGLANG_LENGTHS = (2.2, 2.6, 0.0, 3.1, 2.9)  # spec_accept_length per tick (0: nothing to report)
PROD = '{namespace="prod"}'


@dataclass
class Fleet:
    prom: PrometheusServer
    exporters: dict[str, ReplayExporter]
    at: float


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    t0 = time.time()
    exporters = {pod: ReplayExporter(model, tr, t0) for pod, (_, model, tr) in PODS.items()}
    for e in exporters.values():
        e.__enter__()
    targets = [(e.target, {"deployment": PODS[p][0], "pod": p, "namespace": "prod"})
               for p, e in exporters.items()]

    def sglang_page(n: int) -> Reply:  # SGLang's gauges, two DP ranks, K = 3
        length = SGLANG_LENGTHS[int((time.time() - t0) / TICK) % len(SGLANG_LENGTHS)]
        return Reply(body=sglang_text(length, max(0.0, (length - 1) / 3), running=3, model="qwen",
                                      dp_ranks=2))

    sgl = MetricsServer(sglang_page).__enter__()
    targets.append((sgl.url.removeprefix("http://").removesuffix("/metrics"),
                    {"deployment": "sgl", "pod": "sgl-0", "namespace": "sglang"}))
    try:
        with PrometheusServer(binary, tmp_path_factory.mktemp("prometheus"), targets) as prom:
            prom.wait_for_targets(len(targets))
            start = math.ceil(time.time()) + 2  # scrapes before the window, so it begins with samples
            exporters[RESTARTED].restart_at = start + RESTART_INTO_WINDOW - t0
            at = float(start + WINDOW)
            wait_until(at + 1.5)  # the scrape at `at` is stored
            yield Fleet(prom, exporters, at)
    finally:
        for e in exporters.values():
            e.__exit__()
        sgl.__exit__()


# --------------------------------------------------------------------------- independent computation
def group_increase(f: Fleet, name: str, deployment: str, position: str | None = None) -> float:
    """Sum over the deployment's series of the increase of ``name`` in the window."""
    served = {v for n, lab, v in all_served(list(f.exporters.values())) if n == name}
    total = 0.0
    sel = f'deployment="{deployment}"' + (f',position="{position}"' if position is not None else "")
    series = f.prom.raw(f"{name}{{{sel}}}[{WINDOW}s]", f.at)
    assert series, name
    for _, samples in series:
        assert all(v in served for _, v in samples), f"{name}: Prometheus holds a value no exporter served"
        inc = prometheus_increase(samples, round((f.at - WINDOW) * 1000), round(f.at * 1000))
        total += inc or 0.0
    return total


def running_distribution(f: Fleet, deployment: str, step: float) -> dict[int, int]:
    """Running requests summed over the deployment's pods at each step time (latest sample
    at or before it), counted per value."""
    series = f.prom.raw(f'vllm:num_requests_running{{deployment="{deployment}"}}[{WINDOW + 30}s]', f.at)
    n = round(WINDOW / step)
    counts: dict[int, int] = {}
    for i in range(n + 1):
        t = round((f.at - WINDOW + i * step) * 1000)
        latest = [[v for ts, v in samples if ts <= t][-1:] for _, samples in series]
        if any(latest):  # no sample of any pod yet: Prometheus has no value at that step
            total = round(sum(v[0] for v in latest if v))
            counts[total] = counts.get(total, 0) + 1
    return counts


def observe(f: Fleet, *args: str) -> tuple[int, str, str]:
    """``observe --prometheus`` over the window; the vLLM exporters' namespace unless --selector."""
    sel = [] if "--selector" in args else ["--selector", PROD]
    r = CliRunner().invoke(cli, ["observe", "--prometheus", f.prom.url, "--window", f"{WINDOW}s",
                                 "--at", f"{f.at:.3f}", "--interval", "1", *sel, *args])
    return r.exit_code, r.stdout, r.stderr


# --------------------------------------------------------------------------- tests
def test_per_deployment_equals_independent_computation(fleet: Fleet) -> None:
    code, out, err = observe(fleet, "--by", "deployment", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "Fleet"
    from jsonschema import Draft202012Validator

    from spectune.documents.schema import SCHEMAS

    assert not list(Draft202012Validator(SCHEMAS["Fleet"]).iter_errors(doc))
    groups = {g["labels"]["deployment"]: g for g in doc["groups"]}
    assert set(groups) == {"chat", "code"}
    # the restart really happened inside the window, in the raw samples
    raw = fleet.prom.raw(f'{SPEC[0]}{{pod="{RESTARTED}"}}[{WINDOW}s]', fleet.at)[0][1]
    assert any(b[1] < a[1] for a, b in itertools.pairwise(raw))
    for dep, g in groups.items():
        assert g["kind"] == "Observation" and g["labels"]["model_name"] == PODS[f"{dep}-0"][1]
        spec = g["speculation"]
        drafts = group_increase(fleet, SPEC[0], dep)
        dtok = group_increase(fleet, SPEC[1], dep)
        acc = group_increase(fleet, SPEC[2], dep)
        pos = [group_increase(fleet, SPEC[3], dep, str(i)) for i in range(3)]
        print(f"{dep}: spectune drafts={spec['drafts']} accepted={spec['accepted_tokens']} "
              f"per-pos={spec['per_position']['accepted']} | independent drafts={drafts:.6g} "
              f"accepted={acc:.6g} per-pos={[round(p, 6) for p in pos]}")
        assert spec["drafts"] == pytest.approx(drafts, rel=1e-6)
        assert spec["draft_tokens"] == pytest.approx(dtok, rel=1e-6)
        assert spec["accepted_tokens"] == pytest.approx(acc, rel=1e-6)
        assert spec["per_position"]["accepted"] == pytest.approx(pos, rel=1e-6)
        cond = [pos[0] / drafts, pos[1] / pos[0], pos[2] / pos[1]]
        assert g["acceptance"]["conditional"] == pytest.approx(cond, rel=1e-5)
        assert spec["mean_acceptance_length"] == pytest.approx(1 + acc / drafts, rel=1e-5)
        # batch mix: running requests over the gauge samples
        dist = running_distribution(fleet, dep, doc["window"]["step_seconds"])
        got = {d["running"]: d["samples"] for d in g["operating_point"]["running"]["distribution"]}
        print(f"{dep}: running spectune={got} independent={dist}")
        assert got == dist
        # context: finished requests' prompt + generation lengths
        for h in ("prompt_tokens", "generation_tokens"):
            name = f"vllm:request_{h}"
            mean = group_increase(fleet, name + "_sum", dep) / group_increase(fleet, name + "_count", dep)
            assert g["operating_point"][h]["mean"] == pytest.approx(mean, rel=1e-5)
    assert any("1 counter reset" in n for n in groups["code"]["notes"])
    assert not any("counter reset(s)" in n for n in groups["chat"]["notes"])
    assert any("increase()" in n for n in doc["notes"])


def test_default_grouping_is_model_name_and_each_group_loads_as_an_observation(
        fleet: Fleet, tmp_path: Path) -> None:
    import yaml

    from spectune.documents.observation import observation_from_dict

    code, out, err = observe(fleet, "-o", "yaml")
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert [g["labels"] for g in doc["groups"]] == [{"model_name": "tiny-llama"},
                                                    {"model_name": "tiny-llama-code"}]
    obs = observation_from_dict(doc["groups"][0], "group 0")
    assert obs.labels == {"model_name": "tiny-llama"} and obs.source.kind == "prometheus"
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(doc["groups"][1]), encoding="utf-8")
    r = CliRunner().invoke(cli, ["recommend", "llama-3.1-8b-h100-ngram", "--observed",
                                 str(tmp_path / "g.yaml"), "-o", "json"])
    assert r.exit_code == 0, r.stderr
    (tmp_path / "fleet.yaml").write_text(out, encoding="utf-8")  # or the group, straight from the Fleet
    r2 = CliRunner().invoke(cli, ["recommend", "llama-3.1-8b-h100-ngram", "--observed",
                                  str(tmp_path / "fleet.yaml"), "--match", "model_name=tiny-llama-code",
                                  "-o", "json"])
    assert r2.exit_code == 0 and json.loads(r2.stdout)["acceptance"] == json.loads(r.stdout)["acceptance"]
    code, table, _ = observe(fleet, "--by", "deployment,pod")
    assert code == 0 and "deployment=code, pod=code-1" in table


def test_faults(fleet: Fleet) -> None:
    code, _, err = observe(fleet, "--selector", '{namespace="staging"}')
    assert code == 7 and "no vllm:spec_decode_*" in err and 'namespace="staging"' in err
    code, _, err = observe(fleet, "--selector", '{namespace=~"("}')
    assert code == 2 and "Prometheus rejected the query" in err
    code, _, err = observe(fleet, "--by", "bad-label")
    assert code == 2 and "not a Prometheus label name" in err
    r = CliRunner().invoke(cli, ["observe", "--prometheus", f"http://127.0.0.1:{closed_port()}",
                                 "--window", "20s"])
    assert r.exit_code == 3 and "refused" in r.stderr
    # a path that is not the Prometheus API: HTTP 404
    r = CliRunner().invoke(cli, ["observe", "--prometheus", f"{fleet.prom.url}/nothing", "--window", "5m"])
    assert r.exit_code == 4 and "HTTP 404" in r.stderr


PROFILE = "llama-3.1-8b-h100-ngram"


def test_recommend_gives_one_gamma_table_per_deployment(fleet: Fleet) -> None:
    base = ["recommend", PROFILE, "--prometheus", fleet.prom.url, "--window", f"{WINDOW}s",
            "--at", f"{fleet.at:.3f}", "--interval", "1", "--selector", PROD]
    r = CliRunner().invoke(cli, [*base, "--by", "deployment", "-o", "json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "FleetReport"
    from jsonschema import Draft202012Validator

    from spectune.documents.schema import SCHEMAS

    assert not list(Draft202012Validator(SCHEMAS["FleetReport"]).iter_errors(doc))
    assert [g["labels"]["deployment"] for g in doc["groups"]] == ["chat", "code"]
    obs = json.loads(observe(fleet, "--by", "deployment", "-o", "json")[1])
    for g, o in zip(doc["groups"], obs["groups"], strict=True):
        rec = g["recommendation"]
        # each table is at that deployment's own acceptance and observed batch sizes
        assert g["acceptance"]["conditional"] == pytest.approx(o["acceptance"]["conditional"], rel=1e-3)
        busy = sorted(d["running"] for d in o["operating_point"]["running"]["distribution"] if d["running"])
        assert rec["batch_sizes"] == busy == [m["batch"] for m in g["batch_mix"]]
        assert sum(m["weight"] for m in g["batch_mix"]) == pytest.approx(1, abs=1e-3)
        # the recommended gamma per batch is the table's gamma* where one context is observed
        if len(rec["context_lengths"]) == 1:
            assert [x["gamma"] for x in g["recommended"]["gamma"]] == [p["gamma"] for p in rec["points"]]
        assert g["current"] is None and g["gain"] is None
    table = CliRunner().invoke(cli, [*base, "--by", "deployment"])
    assert table.exit_code == 0 and "== model_name=tiny-llama, deployment=chat ==" in table.stdout
    # a selector matching two models, without --by: which profile goes with which is unknown
    r = CliRunner().invoke(cli, base)
    assert r.exit_code == 2 and "matches 2 models" in r.stderr
    r = CliRunner().invoke(cli, [*base, "--match", "model_name=tiny-llama-code", "--emit", "vllm"])
    assert r.exit_code == 0 and json.loads(r.stdout)["method"] == "ngram"
    r = CliRunner().invoke(cli, [*base, "--match", "deployment=chat"])
    assert r.exit_code == 2 and "not a grouping label" in r.stderr


def test_fleet_file_compares_current_and_recommended_gamma(fleet: Fleet, tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "chat.sh").write_text(
        "vllm serve tiny-llama --speculative-config "
        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 7, \"prompt_lookup_max\": 3}'\n",
        encoding="utf-8")
    (tmp_path / "fleet.yaml").write_text(
        f"prometheus: {fleet.prom.url}\nwindow: {WINDOW}s\nby: [deployment]\n"
        "selector: '{namespace=\"prod\"}'\n"
        f"deployments:\n  - match: {{deployment: chat}}\n    profile: {PROFILE}\n    config: deploy/chat.sh\n"
        f"  - match: {{deployment: gone}}\n    profile: {PROFILE}\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["fleet", str(tmp_path / "fleet.yaml"), "--at", f"{fleet.at:.3f}",
                                 "--interval", "1", "-o", "yaml"])
    assert r.exit_code == 0, r.stderr
    import yaml

    doc = yaml.safe_load(r.stdout)
    (g,) = doc["groups"]
    assert {x["gamma"] for x in g["current"]["gamma"]} == {7}
    rec = g["recommendation"]
    # the current speedup is the table's speedup at gamma 7, weighted by the batch mix
    gi = rec["gammas"].index(7) if 7 in rec["gammas"] else None
    if gi is not None:
        w = {m["batch"]: m["weight"] for m in g["batch_mix"]}
        by_batch: dict[int, list[float]] = {}
        for p in rec["points"]:
            by_batch.setdefault(p["batch"], []).append(p["speedups"][gi])
        expect = sum(w[b] * sum(v) / len(v) for b, v in by_batch.items())
        assert g["current"]["speedup"] == pytest.approx(expect, rel=2e-3)
    # speedups are printed to 4 significant digits
    assert g["gain"] == pytest.approx(g["recommended"]["speedup"] / g["current"]["speedup"] - 1, abs=1e-3)
    assert g["recommended"]["speedup"] >= g["current"]["speedup"] * (1 - 1e-3)
    assert any("deployment=code" in n and "no deployments entry" in n for n in doc["notes"])
    assert any("deployment=gone" in n for n in doc["notes"])


def test_sglang_gauges_through_prometheus(fleet: Fleet) -> None:
    """SGLang shows only gauges of the mean: the window's figure is the mean over the gauge
    steps of the mean over DP ranks (tp_rank 0), steps reporting 0 left out."""
    code, out, err = observe(fleet, "--selector", '{namespace="sglang"}', "-o", "json")
    assert code == 0, err
    (g,) = json.loads(out)["groups"]
    assert g["engine"]["name"] == "sglang" and g["labels"] == {"model_name": "qwen"}
    step = json.loads(out)["window"]["step_seconds"]
    series = {name: fleet.prom.raw(f'{name}{{namespace="sglang",tp_rank="0"}}[{WINDOW + 30}s]', fleet.at)
              for name in ("sglang:spec_accept_length", "sglang:spec_accept_rate")}
    lengths, rates = [], []
    for i in range(round(WINDOW / step) + 1):
        t = round((fleet.at - WINDOW + i * step) * 1000)
        at_t = {n: [[v for ts, v in smp if ts <= t][-1:] for _, smp in ss] for n, ss in series.items()}
        ls = [v[0] for v in at_t["sglang:spec_accept_length"] if v]
        if ls and sum(ls) / len(ls) >= 1:
            lengths.append(sum(ls) / len(ls))
            rs = [v[0] for v in at_t["sglang:spec_accept_rate"] if v]
            rates.append(sum(rs) / len(rs))
    tau = sum(lengths) / len(lengths)
    print(f"sglang: spectune mean length={g['speculation']['mean_acceptance_length']} "
          f"independent={tau:.6f} over {len(lengths)} steps")
    assert 2.2 < tau < 3.1 and len(lengths) < round(WINDOW / step) + 1  # idle steps were left out
    # documents round to 6 significant digits
    assert g["speculation"]["mean_acceptance_length"] == pytest.approx(tau, rel=1e-6)
    assert g["speculation"]["draft_acceptance_rate"] == pytest.approx(sum(rates) / len(rates), rel=1e-6)
    assert g["speculation"]["num_speculative_tokens"] == round((tau - 1) / (sum(rates) / len(rates))) == 3
    assert g["acceptance"]["kind"] == "mean-length"
