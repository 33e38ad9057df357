"""`spectune rules`: the thresholds against the cost model they come from, the rules file's
shape (names, engines, comments), and its inputs refused in one line. Prometheus's own tools
check the files in tests/test_rules_promtool.py and a real server in
tests/test_rules_prometheus.py (both marked `prometheus`)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import spectune
from spectune.cli.main import cli
from spectune.core.acceptance import Acceptance
from spectune.core.speedup import speedup_grid
from spectune.core.thresholds import IDLE_BELOW, bands_of, thresholds
from spectune.documents.profiles import load_deployment
from spectune.engines.registry import ENGINES
from spectune.engines.sglang import metrics as sglang
from spectune.engines.vllm import metrics as vllm

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))
TOL = 0.03


def _sp(dep, batch: int, context: int, gamma: int, alpha: float | None = None) -> float:
    """Sp of ``gamma`` at one point by the core's own grid, at i.i.d. ``alpha`` if given."""
    # the deployment's own workload at one point: its prompt/output lengths (aggregated) kept
    one = replace(dep, workload=replace(dep.workload, batch_sizes=(batch,), context_lengths=(context,)))
    if alpha is not None:
        one = replace(one, acceptance=Acceptance.iid(alpha))
    return float(speedup_grid(one, gamma_max=max(gamma, 1)).speedup[0, 0, gamma])


@pytest.mark.parametrize("example", [e.stem for e in EXAMPLES])
def test_thresholds_are_where_the_cost_model_says(example: str) -> None:
    dep = load_deployment(example)
    th = thresholds(dep, tolerance=TOL)
    assert th.context == dep.workload.context_lengths[0]
    found = 0
    for b in th.bands:
        if b.breakeven_alpha is not None:
            found += 1
            assert b.gamma_star > 0 and b.feasible
            at = _sp(dep, b.batch, th.context, b.gamma_star, b.breakeven_alpha)
            assert at == pytest.approx(1.0, abs=1e-6)
            # just below it, speculation with gamma* loses
            assert _sp(dep, b.batch, th.context, b.gamma_star, b.breakeven_alpha - 0.01) < 1.0
        if b.warning_alpha is not None:
            assert b.warning_alpha > b.breakeven_alpha
            assert _sp(dep, b.batch, th.context, b.gamma_star, b.warning_alpha) == \
                pytest.approx(1.0 + TOL * b.speedup_star, abs=1e-6)
        if b.gamma_star:
            one = replace(dep, workload=replace(dep.workload, batch_sizes=(b.batch,),
                                                context_lengths=(th.context,)))
            sp = speedup_grid(one, gamma_max=64).speedup[0, 0]
            ok = {k for k in range(1, 65) if sp[k] >= (1 - TOL) * b.speedup_star}
            assert set(b.ok_gammas) == ok and b.gamma_star in ok
            assert b.plain_loses == ((1 - TOL) * b.speedup_star > 1.0)
        else:
            assert b.breakeven_alpha is None and b.warning_alpha is None and not b.plain_loses
    assert found, f"{example}: no band has a break-even acceptance"


def test_breakeven_moves_with_batch_and_context() -> None:
    """Speculation pays less at a larger batch, so the acceptance it needs rises (llama-70b:
    gamma* > 0 everywhere that fits); --context moves the numbers."""
    dep = load_deployment("llama-3.1-70b-h100-eagle3")
    a = [b.breakeven_alpha for b in thresholds(dep, tolerance=TOL).bands if b.breakeven_alpha is not None]
    # non-decreasing to 1e-3: at TP 4 the plain step's all-reduce turns two-shot at batch 32
    # (512 KiB, spectune/core/cost/collectives.py), dearer by about what the verify's is, a 1e-4 dip
    assert len(a) >= 4 and all(a[i + 1] >= a[i] - 1e-3 for i in range(len(a) - 1)) and a[-1] > a[0] + 0.1
    long = thresholds(dep, tolerance=TOL, context=32768)
    assert long.context == 32768
    short = thresholds(dep, tolerance=TOL)
    assert [b.breakeven_alpha for b in long.bands] != [b.breakeven_alpha for b in short.bands]


def test_tree_threshold_is_the_trees_per_depth_rate() -> None:
    dep = load_deployment("llama-3.1-8b-h100-eagle2-sglang")  # topk 4
    b = next(b for b in thresholds(dep, tolerance=TOL).bands if b.breakeven_alpha is not None)
    assert b.breakeven_rate > b.breakeven_alpha  # several candidates per depth


def test_bands_split_at_geometric_means() -> None:
    assert bands_of((1, 4, 64)) == [(IDLE_BELOW, 2.0), (2.0, 16.0), (16.0, None)]


# --------------------------------------------------------------------------- the file
def _rules(*args: str) -> tuple[str, dict]:
    res = CliRunner().invoke(cli, ["rules", *args])
    assert res.exit_code == 0, res.output
    return res.output, yaml.safe_load(res.output)


def test_every_engine_has_recording_rules_named_by_convention() -> None:
    assert all(e.recording_rules("5m", "", "model_name", "model_name, instance") for e in ENGINES.values())
    text, doc = _rules("qwen3-30b-a3b-h100-eagle3", "--by", "namespace,deployment", "--window", "5m")
    rec = doc["groups"][0]
    names = {r["record"] for r in rec["rules"]}
    for metric in ("acceptance_rate", "acceptance_length", "acceptance_per_position", "draft_tokens_per_step",
                   "running_requests_per_instance"):
        assert f"model_name_namespace_deployment:spectune_{metric}:mean5m" in names
    assert "model_name_namespace_deployment:spectune_speculation_metrics:present5m" in names
    assert all(re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", n) for n in names)
    engines = {r["labels"]["serving_engine"] for r in rec["rules"]}
    assert engines == set(ENGINES)
    for name in (vllm.DRAFTS, vllm.DRAFT_TOKENS, vllm.ACCEPTED, vllm.PER_POS, vllm.RUNNING,
                 sglang.ACCEPT_LENGTH, sglang.ACCEPT_RATE, sglang.NUM_STEPS, sglang.RUNNING):
        assert name in text
    assert "sum by (model_name, namespace, deployment)" in text


def test_alerts_carry_for_severity_command_and_their_source() -> None:
    text, doc = _rules("qwen3-30b-a3b-h100-eagle3", "--by", "deployment", "--for", "20m",
                       "--tolerance", "0.05")
    alerts = doc["groups"][1]["rules"]
    assert {a["alert"] for a in alerts} == {"SpeculativeAcceptanceLow", "SpeculationSlowsDeployment",
                                            "SpeculativeDraftLengthOff"}
    assert {a["labels"]["severity"] for a in alerts} == {"critical", "warning", "info"}
    for a in alerts:
        assert a["for"] == "20m"
        command = a["annotations"]["command"]
        assert command.startswith("spectune recommend qwen3-30b-a3b-h100-eagle3 --prometheus")
        assert "--match deployment={{ $labels.deployment }}" in a["annotations"]["command"]
    th = thresholds(load_deployment("qwen3-30b-a3b-h100-eagle3"), tolerance=0.05)
    b = next(b for b in th.bands if b.breakeven_alpha is not None)
    # the threshold in the expression and the comment that says where it came from
    assert f"{b.breakeven_rate:.4g} ^ (" in text
    assert f"alpha {b.breakeven_alpha:.3f}" in text and "# thresholds: spectune's cost model: profile" in text
    assert "tolerance 0.05" in text


def _chat_and_moe(tmp_path: Path, head: str = "") -> Path:
    """A fleet file: deployment chat (llama-70b) and moe (qwen3-30b-a3b), grouped by deployment."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"{head}by: [deployment]\ndeployments:\n  - match: {{deployment: chat}}\n"
                     "    profile: llama-3.1-70b-h100-eagle3\n  - match: {deployment: moe}\n"
                     "    profile: qwen3-30b-a3b-h100-eagle3\n")
    return fleet


def test_fleet_file_alerts_each_deployment_with_its_profile(tmp_path: Path) -> None:
    fleet = _chat_and_moe(tmp_path, "prometheus: http://prom:9090\nselector: '{namespace=\"prod\"}'\n")
    text, doc = _rules(str(fleet))
    alerts = doc["groups"][1]["rules"]
    chat = [a for a in alerts if 'deployment="chat"' in a["expr"]]
    moe = [a for a in alerts if 'deployment="moe"' in a["expr"]]
    assert chat and moe and len(chat) + len(moe) == len(alerts)
    assert {a["labels"]["spectune_profile"] for a in chat} == {"llama-3.1-70b-h100-eagle3"}
    assert 'rate(vllm:spec_decode_num_drafts_total{namespace="prod"}[10m])' in text
    assert "--prometheus http://prom:9090 --selector '{namespace=\"prod\"}' --by deployment" in text


def test_api_returns_the_same_file() -> None:
    text, _ = _rules("llama-3.1-8b-h100-ngram", "--by", "deployment")
    assert spectune.rules("llama-3.1-8b-h100-ngram", by=["deployment"],
                          command="spectune rules llama-3.1-8b-h100-ngram --by deployment") == text


@pytest.mark.parametrize(("args", "says"), [
    (["--selector", "namespace=prod"], "expected label matchers in braces"),
    (["--selector", '{namespace=prod}'], "is not a label matcher"),
    (["--selector", '{a="b" c="d"}'], "expected ',' between matchers"),
    (["--by", "bad-label"], "is not a Prometheus label name"),
    (["--tolerance", "1.5"], "--tolerance"),
    (["--window", "0"], "--window"),
    (["--for", "forever"], "--for"),
])
def test_bad_options_get_one_line_and_exit_2(args: list[str], says: str) -> None:
    res = CliRunner().invoke(cli, ["rules", "llama-3.1-8b-h100-ngram", *args])
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_fleet_match_on_a_label_not_grouped_by_names_file_line_and_key(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("by: [deployment]\ndeployments:\n  - match: {deployment: chat}\n"
                     "    profile: llama-3.1-8b-h100-ngram\n  - match: {team: x}\n"
                     "    profile: llama-3.1-8b-h100-ngram\n")
    res = CliRunner().invoke(cli, ["rules", str(fleet)])
    assert res.exit_code == 2
    assert f"{fleet}:5: deployments[1].match: label 'team' is not a grouping label" in res.output


def test_rules_stay_out_of_the_start_up_of_other_commands() -> None:
    code = ("import sys, spectune.cli.main\n"
            "loaded = [m for m in ('spectune.render.rules', 'spectune.core.thresholds',\n"
            "                      'spectune.documents.fleet_file', 'yaml')\n"
            "          if m in sys.modules]\n"
            "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_grafana_dashboard_plots_the_recorded_series_against_the_recommendation(tmp_path: Path) -> None:
    import json

    fleet = _chat_and_moe(tmp_path)
    rules_text, _ = _rules(str(fleet))
    res = CliRunner().invoke(cli, ["rules", str(fleet), "--grafana"])
    assert res.exit_code == 0, res.output
    board = json.loads(res.output)
    recorded = set(re.findall(r"record: (\S+)", rules_text))
    queries = [q for p in board["panels"] for q in p["targets"]]
    for q in queries:  # every series a panel reads is one the rules record
        assert set(re.findall(r"[a-z_]+:spectune_[a-z_]+:[a-z0-9]+", q["expr"])) <= recorded
    refs = [q for q in queries if q["refId"] != "A"]
    assert {q["legendFormat"].split(" (")[0] for q in refs} == {"recommended gamma", "break-even"}
    moe_gamma = next(q["expr"] for q in refs if q["legendFormat"].startswith("recommended gamma (qwen3"))
    for b in thresholds(load_deployment("qwen3-30b-a3b-h100-eagle3"), tolerance=TOL).bands:
        if b.feasible:
            assert f"* 0 + {b.gamma_star})" in moe_gamma
    assert 'deployment="moe"' in moe_gamma and 'deployment="chat"' not in moe_gamma
