"""`spectune rules` checked by Prometheus's own tool, promtool (Debian's `prometheus` package;
scripts/ci_prometheus.sh installs it): `promtool check rules` on the rules of every shipped
example and of fleet files, and `promtool test rules` unit tests -- series in, alerts out.

The unit tests are written here as promtool test files (tests/rules/*.test.yml would hold
numbers that move whenever the cost model does): each scenario takes its operating point
from spectune's own thresholds (a batch where gamma* is 0, a draft length outside those
within tolerance, an acceptance between the warning and the break-even level...), feeds
the counters and gauges a vLLM / SGLang server would show, and states the alerts that must
fire with their labels and annotations (the annotations as the generated rule writes them,
its label and value templates filled in). Marked `prometheus`; skipped without promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.thresholds import Band, thresholds
from spectune.documents.profiles import load_deployment
from spectune.engines.sglang import metrics as sglang
from spectune.engines.vllm import metrics as vllm
from spectune.render.grafana import reference
from spectune.render.rules import RulesSpec, Target

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
# MOE: an MoE example with points where gamma* = 0 and points where speculation pays
CHAT, MOE = "llama-3.1-70b-h100-eagle3", "qwen3.6-35b-a3b-b200-mtp"
TOL = 0.03
MINUTES = 40  # samples per series, one a minute
EVAL = "30m"  # window 5m and for 10m have long passed
# per minute: 16 and 12 a second, so that Prometheus's rates and their ratios are exact
DRAFTS, ACCEPTED = 960.0, 720.0


def promtool() -> str:
    found = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if found is None:
        pytest.skip("no promtool (apt-get install prometheus)")
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, check=False)


def generate(tmp: Path, *args: str) -> Path:
    res = CliRunner().invoke(cli, ["rules", *args])
    assert res.exit_code == 0, res.output
    out = tmp / "spectune.rules.yml"
    out.write_text(res.output, encoding="utf-8")
    return out


def fleet_file(tmp: Path) -> Path:
    path = tmp / "fleet.yaml"
    path.write_text(f"prometheus: http://prometheus.monitoring:9090\nselector: '{{namespace=\"prod\"}}'\n"
                    f"by: [deployment]\ndeployments:\n  - match: {{model_name: chat}}\n    profile: {CHAT}\n"
                    f"  - match: {{model_name: moe}}\n    profile: {MOE}\n"
                    "  - match: {model_name: tree}\n    profile: llama-3.1-8b-h100-eagle2-sglang\n",
                    encoding="utf-8")
    return path


# --------------------------------------------------------------------------- check rules
WIDE = ("--by", "namespace,deployment", "--selector", '{job=~"vllm.*",env!="dev"}', "--window", "2m",
        "--for", "1h", "--context", "8192")


@pytest.mark.parametrize("example", [e.stem for e in EXAMPLES])
@pytest.mark.parametrize("options", [(), WIDE])
def test_promtool_checks_the_rules_of_every_example(tmp_path: Path, example: str,
                                                    options: tuple[str, ...]) -> None:
    res = run_promtool("check", "rules", str(generate(tmp_path, example, *options)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_promtool_checks_the_rules_of_fleet_files(tmp_path: Path) -> None:
    for fleet in (ROOT / "examples" / "gitops" / "fleet.yaml", fleet_file(tmp_path)):
        res = run_promtool("check", "rules", str(generate(tmp_path, str(fleet))))
        assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_parses_every_query_of_the_grafana_dashboard(tmp_path: Path) -> None:
    import json

    res = CliRunner().invoke(cli, ["rules", str(fleet_file(tmp_path)), "--grafana"])
    assert res.exit_code == 0, res.output
    exprs = [q["expr"] for p in json.loads(res.output)["panels"] for q in p["targets"]]
    assert len(exprs) > len(json.loads(res.output)["panels"])  # reference lines too
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}:x", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = run_promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- test rules
def counter(per_minute: float) -> str:
    return f"0+{per_minute:g}x{MINUTES}"


def gauge(value: float) -> str:
    return f"{value:g}x{MINUTES}"


@dataclass
class Pod:
    """One server's series: a vLLM (counters per minute, K draft tokens per draft) or, with
    ``sglang``, SGLang's gauges; ``running`` requests per engine (DP rank)."""

    model: str
    deployment: str
    instance: str
    running: tuple[float, ...]
    drafts: float = 0.0  # 0: speculation off (no spec_decode series at all)
    k: int = 0
    accepted: tuple[float, ...] = ()  # per position, per minute
    sglang: tuple[float, float] | None = None  # (accept length, accept rate)

    def series(self) -> list[dict[str, str]]:
        base = f'namespace="prod", deployment="{self.deployment}", model_name="{self.model}", ' \
               f'instance="{self.instance}"'
        out = []
        if self.sglang is not None:
            length, rate = self.sglang
            for tp in ("0", "1"):  # tensor-parallel ranks repeat the figure: one must be read
                lab = f'{{{base}, tp_rank="{tp}", dp_rank="0"}}'
                out += [{"series": f"{sglang.ACCEPT_LENGTH}{lab}", "values": gauge(length)},
                        {"series": f"{sglang.ACCEPT_RATE}{lab}", "values": gauge(rate)},
                        {"series": f"{sglang.RUNNING}{lab}", "values": gauge(self.running[0])}]
            return out
        for e, r in enumerate(self.running):
            out.append({"series": f'{vllm.RUNNING}{{{base}, engine="{e}"}}', "values": gauge(r)})
        if self.drafts:
            lab = f'{{{base}, engine="0"}}'
            out += [{"series": f"{vllm.DRAFTS}{lab}", "values": counter(self.drafts)},
                    {"series": f"{vllm.DRAFT_TOKENS}{lab}", "values": counter(self.drafts * self.k)},
                    {"series": f"{vllm.ACCEPTED}{lab}", "values": counter(sum(self.accepted))}]
            out += [{"series": f'{vllm.PER_POS}{{{base}, engine="0", position="{i}"}}', "values": counter(a)}
                    for i, a in enumerate(self.accepted)]
        return out


@dataclass
class Expect:
    alert: str
    severity: str
    deployment: str
    model: str
    value: float
    engine: str = "vllm"


def band(profile: str, pick: Any) -> Band:
    found = [b for b in thresholds(load_deployment(profile), tolerance=TOL).bands if b.feasible and pick(b)]
    assert found, f"{profile}: no band for this scenario"
    return found[0]


def mid(b: Band) -> float:
    """An observed batch inside the band."""
    return b.batch if b.high is None or b.batch < b.high else (b.low + b.high) / 2


def chain_length(rate: float, k: int) -> float:
    return sum(rate ** d for d in range(k + 1))


def scenarios() -> tuple[list[Pod], list[Expect]]:
    pods, expect = [], []
    # chat (llama-70b): a band where gamma* > 0, served at gamma*
    b = band(CHAT, lambda b: b.breakeven_alpha is not None and b.warning_alpha is not None)
    k = b.gamma_star
    pods.append(Pod("chat", "good", "a:8000", (mid(b),), DRAFTS, k, (ACCEPTED,) * k))
    pods.append(Pod("chat", "collapsed", "b:8000", (mid(b),), DRAFTS, k, (96.0,) + (0.0,) * (k - 1)))
    expect += [Expect("SpeculativeAcceptanceLow", sev, "collapsed", "chat", 1.1)
               for sev in ("critical", "warning")]
    # between the warning and the break-even acceptance: the warning alone (a multiple of 48
    # accepted a minute: a mean length of two decimals)
    low, high = chain_length(b.breakeven_rate, k), chain_length(b.warning_rate, k)
    accepted = 48.0 * round(((low + high) / 2 - 1) * DRAFTS / 48)
    assert low < 1 + accepted / DRAFTS < high
    pods.append(Pod("chat", "marginal", "c:8000", (mid(b),), DRAFTS, k, (accepted,) + (0.0,) * (k - 1)))
    expect.append(Expect("SpeculativeAcceptanceLow", "warning", "marginal", "chat", 1 + accepted / DRAFTS))
    # moe (qwen3.6-35b-a3b): speculating where gamma* is 0; plain decode where it pays; a draft length off
    off = band(MOE, lambda b: b.gamma_star == 0)
    pods.append(Pod("moe", "slow", "d:8000", (mid(off),), DRAFTS, 2, (ACCEPTED, ACCEPTED)))
    expect.append(Expect("SpeculationSlowsDeployment", "warning", "slow", "moe", mid(off)))
    pays = band(MOE, lambda b: b.plain_loses)
    # two DP ranks per instance and two instances: the batch is per instance, averaged
    pods.append(Pod("moe", "plain", "e:8000", (mid(pays) / 2 - 1, mid(pays) / 2 - 1)))
    pods.append(Pod("moe", "plain", "f:8000", (mid(pays) / 2 + 1, mid(pays) / 2 + 1)))
    expect.append(Expect("SpeculationSlowsDeployment", "info", "plain", "moe", mid(pays)))
    wrong = next(k for k in range(1, 65) if k not in pays.ok_gammas and k > pays.gamma_star)
    pods.append(Pod("moe", "long", "g:8000", (mid(pays),), DRAFTS, wrong, (DRAFTS,) * wrong))
    expect.append(Expect("SpeculativeDraftLengthOff", "info", "long", "moe", float(wrong)))
    # tree (SGLang EAGLE-2): acceptance collapsed, read from tp_rank 0 only
    t = band("llama-3.1-8b-h100-eagle2-sglang", lambda b: b.breakeven_alpha is not None)
    pods.append(Pod("tree", "sgl", "h:30000", (mid(t),), sglang=(1.05, 0.05 / t.gamma_star)))
    sev = ["critical"] + (["warning"] if t.warning_alpha is not None else [])
    expect += [Expect("SpeculativeAcceptanceLow", s, "sgl", "tree", 1.05, "sglang") for s in sev]
    return pods, expect


def sample(metric: str, labels: str, value: float) -> dict[str, Any]:
    """A recorded series' expected value at EVAL (vLLM's; window 5m), to 1e-3: promtool
    compares floats exactly, and a ratio of extrapolated rates may differ in the last bit."""
    name = f"model_name_deployment:spectune_{metric}:mean5m"
    return {"expr": f"round({name}{{{labels}}}, 0.001)", "eval_time": EVAL,
            "exp_samples": [{"labels": f'{{{labels}, serving_engine="vllm"}}', "value": round(value, 3)}]}


def render(template: str, labels: dict[str, str], value: float) -> str:
    """An annotation as Prometheus expands it: the label and value templates spectune writes."""
    out = template.replace('{{ "{{" }}', "\0")
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], out)
    out = re.sub(r'\{\{ \$value \| printf "%\.(\d)f" \}\}', lambda m: f"{value:.{m.group(1)}f}", out)
    assert "{{" not in out, out
    return out.replace("\0", "{{")


def test_promtool_unit_tests_fire_where_the_thresholds_say(tmp_path: Path) -> None:
    rules_path = generate(tmp_path, str(fleet_file(tmp_path)), "--window", "5m", "--for", "10m")
    rules = yaml.safe_load(rules_path.read_text(encoding="utf-8"))["groups"][1]["rules"]
    pods, expected = scenarios()
    tests: list[dict[str, Any]] = []
    by_alert: dict[str, list[dict[str, Any]]] = {}
    profile = {"chat": CHAT, "moe": MOE, "tree": "llama-3.1-8b-h100-eagle2-sglang"}
    for e in expected:
        labels = {"model_name": e.model, "deployment": e.deployment, "serving_engine": e.engine,
                  "severity": e.severity, "spectune_profile": profile[e.model]}
        rule = next(r for r in rules if r["alert"] == e.alert and r["labels"]["severity"] == e.severity
                    and f'model_name="{e.model}"' in r["expr"])
        notes = {k: render(v, labels, e.value) for k, v in rule["annotations"].items()}
        by_alert.setdefault(e.alert, []).append({"exp_labels": labels, "exp_annotations": notes})
    for alert in ("SpeculativeAcceptanceLow", "SpeculationSlowsDeployment", "SpeculativeDraftLengthOff"):
        tests.append({"eval_time": EVAL, "alertname": alert, "exp_alerts": by_alert.get(alert, [])})
    chat_good = next(p for p in pods if p.deployment == "good")
    plain = next(e.value for e in expected if e.deployment == "plain")
    # the dashboard's reference line (spectune rules --grafana): the recommended gamma at each
    # moe deployment's observed batch
    moe = Target({"model_name": "moe"}, thresholds(load_deployment(MOE), tolerance=TOL), MOE)
    spec = RulesSpec(("model_name", "deployment"), 'namespace="prod"', 300.0, 600.0)
    gamma_ref = reference(moe, spec, "gamma")
    at = {p.deployment: plain if p.deployment == "plain" else sum(p.running)
          for p in pods if p.model == "moe"}
    gammas = {d: next(b.gamma_star for b in moe.thresholds.bands
                      if b.low <= batch and (b.high is None or batch < b.high)) for d, batch in at.items()}
    samples = [{"expr": gamma_ref, "eval_time": EVAL,
                "exp_samples": [{"labels": f'{{model_name="moe", deployment="{d}", serving_engine="vllm"}}',
                                 "value": g} for d, g in sorted(gammas.items())]},
               sample("acceptance_rate", 'model_name="chat", deployment="good"', ACCEPTED / DRAFTS),
               sample("acceptance_per_position", 'model_name="chat", deployment="good", position="1"',
                      ACCEPTED / DRAFTS),
               sample("draft_tokens_per_step", 'model_name="chat", deployment="good"', chat_good.k),
               sample("running_requests_per_instance", 'model_name="moe", deployment="plain"', plain)]
    doc = {"rule_files": [rules_path.name], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": [s for p in pods for s in p.series()],
                      "alert_rule_test": tests, "promql_expr_test": samples}]}
    test_file = tmp_path / "spectune.test.yml"
    test_file.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20), encoding="utf-8")
    res = run_promtool("test", "rules", str(test_file))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_promtool_unit_tests_would_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """The unit test above can fail: with the collapsed deployment's alert left out of the
    expectations, promtool reports the alert it did fire."""
    rules_path = generate(tmp_path, str(fleet_file(tmp_path)), "--window", "5m", "--for", "10m")
    pods, _ = scenarios()
    doc = {"rule_files": [rules_path.name], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": [s for p in pods if p.deployment == "collapsed"
                                                         for s in p.series()],
                      "alert_rule_test": [{"eval_time": EVAL, "alertname": "SpeculativeAcceptanceLow",
                                           "exp_alerts": []}]}]}
    test_file = tmp_path / "wrong.test.yml"
    test_file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    res = run_promtool("test", "rules", str(test_file))
    assert res.returncode != 0
    assert "collapsed" in res.stdout + res.stderr
