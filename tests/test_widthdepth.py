"""Seed 003's interview question from first principles: Qwen3.6-35B-A3B on one B200 at
batch 11 with 22 positions per step. Under uniform routing width and depth move the same
experts and width wins for any alpha < 1; with co-activation of consecutive positions the
depth pass loads fewer experts and wins even at alpha = 0.9. No number is typed in: each
claim compares what the cost model computes for the two spends."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.cli.main import cli
from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Parallelism
from spectune.core.model import UNIFORM, Model, Routing
from spectune.core.widthdepth import WidthDepth, width_vs_depth
from spectune.documents.profiles import load_gpu, load_model
from spectune.documents.schema import SCHEMAS

# The seed's co-activation is published only as a figure: 0.5 is an assumption, and the
# threshold test below derives the co-activation at which depth starts to win. The built-in
# model now carries a measured 0.376 (one 383-token route trace, profiles/models/qwen3.6-35b-a3b.yaml).
F_ASSUMED = 0.5


def _wd(model: Model, alpha: float = 0.9, positions: int = 22, batch: int = 11,
        context: int = 0) -> WidthDepth:
    return width_vs_depth(model, load_gpu("b200"), Parallelism(), None, Acceptance.iid(alpha),
                          positions, batch, context)


@pytest.fixture(scope="module")
def qwen36() -> Model:
    """The model under uniform routing (the cost model's coupon collector): each test sets
    the co-activation it is about."""
    return replace(load_model("qwen3.6-35b-a3b"), routing=UNIFORM)


def test_the_builtin_model_carries_its_measured_coactivation() -> None:
    """At the measured F = 0.376 the interview's answer turns on alpha: width below about 0.8,
    depth at 0.9 (the threshold test below finds where for any F)."""
    builtin = load_model("qwen3.6-35b-a3b")
    assert builtin.routing.coactivation == pytest.approx(3.01 / 8, abs=1e-3)
    assert _wd(builtin, 0.5).winner == "width"
    assert _wd(builtin, 0.9).winner == "depth"


def test_uniform_routing_width_wins_and_moves_the_same_experts(qwen36: Model) -> None:
    # (near alpha = 1 depth can win even under uniform routing on this hybrid model: each
    # sequence's linear-attention state is read once per step whatever its positions)
    for alpha in (0.5, 0.9):
        wd = _wd(qwen36, alpha)
        assert wd.width.expert_bytes == pytest.approx(wd.depth.expert_bytes, rel=1e-12)
        assert wd.winner == "width"
        # with the same step cost, width's edge is exactly the alpha tax
        ratio = wd.depth.tokens_per_step / wd.width.tokens_per_step
        assert wd.depth_over_width == pytest.approx(ratio * wd.width.step_seconds / wd.depth.step_seconds)
        assert ratio == pytest.approx((1 + alpha) / 2)


def test_coactivation_makes_depth_win_at_alpha_0_9(qwen36: Model) -> None:
    wd = _wd(replace(qwen36, routing=Routing(coactivation=F_ASSUMED)))
    assert wd.depth.distinct_experts < wd.width.distinct_experts
    assert wd.depth.expert_bytes < wd.width.expert_bytes
    assert wd.winner == "depth"
    # the seed's second framing, on its memory-bound roofline (no per-kernel fixed costs):
    # 2 positions on one speculating sequence beat a batch of 2
    co = replace(qwen36, routing=Routing(coactivation=F_ASSUMED))
    two = width_vs_depth(co, load_gpu("b200"), Parallelism(), None, Acceptance.iid(0.9), 2, 1, 0,
                         achieved=False)
    assert two.winner == "depth"
    # with the measured per-call kernel costs, which do not shrink with fewer experts, the
    # saving at batch 1 is diluted: depth still moves fewer bytes, the throughput is a near tie
    kernel_true = _wd(co, positions=2, batch=1)
    assert kernel_true.depth.expert_bytes < kernel_true.width.expert_bytes
    assert kernel_true.depth_over_width < two.depth_over_width


def test_depth_wins_only_with_coactivation_past_a_threshold(qwen36: Model) -> None:
    """depth / width throughput rises with co-activation from below 1 (uniform) through 1;
    the break-even co-activation is where the expert bytes saved pay the alpha tax."""
    fs = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9]
    ratios = [_wd(replace(qwen36, routing=Routing(coactivation=f))).depth_over_width for f in fs]
    assert all(a < b for a, b in itertools.pairwise(ratios))
    assert ratios[0] < 1 < ratios[-1]
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        width_wins = _wd(replace(qwen36, routing=Routing(coactivation=mid))).winner == "width"
        lo, hi = (mid, hi) if width_wins else (lo, mid)
    at = _wd(replace(qwen36, routing=Routing(coactivation=hi)))
    assert at.depth.step_seconds / at.width.step_seconds == pytest.approx((1 + 0.9) / 2, rel=1e-3)


def test_kv_reads_favour_depth_as_context_grows(qwen36: Model) -> None:
    short, long = _wd(qwen36, context=0), _wd(qwen36, context=32768)
    assert long.depth.attention_bytes < long.width.attention_bytes
    assert long.depth_over_width > short.depth_over_width


def _profile(tmp_path: Path, **over: object) -> str:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump({"gpu": "b200", "model": "qwen3.6-35b-a3b", "drafter": "ngram",
                                 "workload": {"batch_sizes": [11], "context_lengths": [512]},
                                 "acceptance": {"alpha": 0.9}, **over}))
    return str(f)


def test_cli_json_winner_and_throughputs(tmp_path: Path) -> None:
    runner = CliRunner()
    p = _profile(tmp_path, routing={"coactivation": F_ASSUMED, "source": "assumed"})
    res = runner.invoke(cli, ["widthdepth", p, "--positions", "22", "--batch", "11", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert not list(Draft202012Validator(SCHEMAS["WidthDepth"]).iter_errors(doc))
    assert doc["winner"] == "depth"
    assert doc["depth"]["tokens_per_second"] > doc["width"]["tokens_per_second"]
    uni = json.loads(runner.invoke(cli, ["widthdepth", p, "--positions", "22", "--coactivation", "0",
                                         "-o", "json"]).output)
    assert uni["winner"] == "width" and uni["depth"]["batch"] == 11  # default batch N/2
    table = runner.invoke(cli, ["widthdepth", p, "--positions", "22", "--with-drafter", "--with-engine"])
    assert table.exit_code == 0 and "winner:" in table.output
    bad = runner.invoke(cli, ["widthdepth", p, "--positions", "22", "--batch", "5"])
    assert bad.exit_code == 2 and "multiple of --batch" in bad.output


def test_skew_alone_does_not_separate_width_from_depth(qwen36: Model) -> None:
    """Without co-activation positions are interchangeable: skew cuts both spends' experts
    equally, and only co-activation favours depth."""
    uni = _wd(qwen36)
    skew = _wd(replace(qwen36, routing=Routing(decay=3.0)))
    assert skew.width.distinct_experts < uni.width.distinct_experts
    assert skew.width.distinct_experts == pytest.approx(skew.depth.distinct_experts, rel=1e-9)
    assert skew.winner == "width"
    both = _wd(replace(qwen36, routing=Routing(coactivation=F_ASSUMED, decay=3.0)))
    assert both.depth.distinct_experts < both.width.distinct_experts


def test_a_priced_drafter_washes_the_effect_out(qwen36: Model) -> None:
    """Seed 003's footnote: in real engines the draft model's cost washes the depth gain out."""
    from spectune.documents.profiles import load_deployment

    dep = load_deployment("qwen3.6-35b-a3b-b200-mtp")
    co = replace(qwen36, routing=Routing(coactivation=F_ASSUMED))
    free = width_vs_depth(co, dep.gpu, Parallelism(), None, Acceptance.iid(0.9), 22, 11, 0)
    paid = width_vs_depth(co, dep.gpu, Parallelism(), None, Acceptance.iid(0.9), 22, 11, 0, dep.drafter)
    assert paid.depth.draft_seconds > 0
    assert paid.depth_over_width < free.depth_over_width


def test_a_spend_that_does_not_fit_in_memory_never_wins(tmp_path: Path) -> None:
    """Width holds N sequences' KV caches, depth only B: at long context width is the faster
    spend on paper but does not fit, and the winner is the one that does (the table says so)."""
    args = ["widthdepth", "qwen3.6-35b-a3b-b200-mtp", "--positions", "1024", "--batch", "8",
            "--alpha", "0.9", "--context", "200000"]
    res = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert not doc["width"]["fits"] and doc["depth"]["fits"]
    assert doc["width"]["memory_gb"] > doc["depth"]["memory_gb"]
    assert doc["winner"] == "depth" and doc["depth_over_width"] < 1  # faster width, but no fit
    table = CliRunner().invoke(cli, args)
    assert "width does not fit in memory: needs" in table.stdout and "(no fit)" in table.stdout
    short = json.loads(CliRunner().invoke(cli, [*args[:-1], "1024", "-o", "json"]).stdout)
    assert short["width"]["fits"] and short["width"]["memory_note"] is None
