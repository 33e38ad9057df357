"""Emitted settings: the plan passes the gate (never slows a declared point) and one emitting
path serves every engine and command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from emit_support import EAGLE3, SGLANG_CASES, VARYING, parse_sglang, rec_of, write

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.plan import per_batch_gamma
from spectune.core.recommend import recommend
from spectune.documents.profiles import load_deployment
from spectune.engines.emit import build_snippet, make_plan


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- the plan passes the gate
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_plan_never_slows_a_declared_point(example: str) -> None:
    """`spectune check` fails a gamma that slows any declared point (Sp < 1), so neither the
    per-batch gamma nor the static one may pick one (Qwen3-30B-A3B: batch 2 at 2048 tokens)."""
    from spectune.documents.profiles import load_deployment

    rec = recommend(load_deployment(str(EXAMPLES / f"{example}.yaml")))
    plan = make_plan(rec)
    sp = rec.grid.speedup
    for i, (b, g) in enumerate(plan.per_batch):
        assert b == rec.grid.batch[i]
        assert (sp[i, :, g] >= 1 - 1e-9).all(), (b, g, sp[i, :, g])
    assert (sp[:, :, plan.static_gamma] >= 1 - 1e-9).all()


def test_per_batch_gamma_prefers_off_to_slowing_a_context() -> None:
    from dataclasses import replace

    from spectune.core.model import UNIFORM
    from spectune.documents.profiles import load_deployment

    # uniform routing (the coupon collector): every verified token drags in fresh experts, so
    # batch 2 slows its short contexts and gains at its long one, a row with both kinds
    dep = load_deployment(str(EXAMPLES / "qwen3-30b-a3b-h100-eagle3.yaml"))
    rec = recommend(replace(dep, model=replace(dep.model, routing=UNIFORM)))
    per = dict(per_batch_gamma(rec))
    i = list(rec.grid.batch).index(2)
    assert (rec.gamma_star[i] > 0).any() and (rec.gamma_star[i] == 0).any()
    assert per[2] == 0


def test_static_gamma_slows_no_point_of_the_mix() -> None:
    from spectune.core.plan import throughput

    # alpha 0.45: gamma 2 must still slow batch 2048 (at 0.5 it breaks even once the drafter
    # scores one logits row per sequence per pass)
    rec = rec_of(drafter=EAGLE3, acceptance={"alpha": 0.45},
                 workload={"batch_sizes": [1, 2048], "context_lengths": [1024]})
    sp = rec.grid.speedup
    mix = {1: 0.999, 2048: 0.001}  # mostly batch 1, where gamma 2 is best; it slows batch 2048
    tp = throughput(rec.grid)[:, 0, :]
    assert (mix[1] * tp[0] + mix[2048] * tp[1]).argmax() == 2 and sp[1, 0, 2] < 1
    static = make_plan(rec, mix).static_gamma
    assert static == 1 and sp[1, 0, static] >= 1
    assert make_plan(rec, {1: 1.0}).static_gamma == rec.gamma_star[0, 0]  # batch 2048 not in the mix


# --------------------------------------------------------------------------- one emitting path
def test_schedule_described_once_for_both_engines() -> None:
    from spectune.core.plan import describe

    rec = rec_of(**SGLANG_CASES["eagle3-varying"])
    plan = make_plan(rec)
    assert describe(plan) == ", ".join(f"batch {lo}-{hi}: {g}" if lo != hi else f"batch {lo}: {g}"
                                       for lo, hi, g in plan.schedule)
    for kind in ("vllm", "sglang"):
        assert any(describe(plan) in n for n in build_snippet(rec, kind).notes)


def test_build_snippet_takes_the_adaptive_config_path(runner: CliRunner, tmp_path: Path) -> None:
    rec = rec_of(**SGLANG_CASES["eagle3-varying"])
    snip = build_snippet(rec, "sglang", adaptive_path="/etc/sglang/a.json")
    assert parse_sglang(snip.text).speculative_adaptive_config == "/etc/sglang/a.json"
    assert any("> /etc/sglang/a.json" in n for n in snip.notes)
    f = write(tmp_path, **SGLANG_CASES["eagle3-varying"])
    via_emit = runner.invoke(cli, ["emit", str(f), "sglang", "--adaptive-config-path", "/etc/sglang/a.json"])
    assert via_emit.stdout == snip.text
    assert runner.invoke(cli, ["emit", str(f), "sglang"]).stdout == \
        runner.invoke(cli, ["recommend", str(f), "--emit", "sglang"]).stdout


def test_no_adaptive_config_message_fits_both_commands(runner: CliRunner, tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)  # NGRAM cannot adapt
    res = runner.invoke(cli, ["emit", str(f), "sglang-adaptive-config"])
    assert res.exit_code == 2
    assert "use --emit sglang" not in res.stderr
    assert "spectune emit PROFILE sglang" in res.stderr and "--emit sglang" in res.stderr


def test_off_for_a_mix_names_the_deciding_batch_sizes_and_the_weights(runner: CliRunner) -> None:
    """One static K for dp > 1 comes out 0: the note names the batch sizes where every K >= 1
    slows decode down (derived here from the grid) and how the mix was weighted."""
    from spectune.core.plan import SLOWDOWN

    example = "deepseek-v4-flash-8xb200-ep"
    rec = recommend(load_deployment(example))
    plan = make_plan(rec)
    sp = rec.grid.speedup[..., 1:]  # (batch, context, gamma >= 1)
    vetoes = [int(b) for i, b in enumerate(rec.grid.batch)
              if not (sp[i] >= 1 - SLOWDOWN).all(axis=0).any()]
    res = runner.invoke(cli, ["emit", example, "vllm"])
    assert res.exit_code == 0
    if plan.static_gamma == 0:
        assert res.stdout == "null\n" and vetoes
        off = next(n for n in res.stderr.splitlines() if "static K is 0" in n)
        for b in vetoes:
            assert f"batch {b} (" in off
        assert "weighted equally" in off
        assert all(f"batch {b}: {100 / len(rec.grid.batch):.0f}%" in off for b in rec.grid.batch)
    # with the mix on the batch sizes that gain, the same profile speculates
    gain = [b for b in rec.grid.batch if int(b) not in vetoes]
    mix = [arg for b in gain for arg in ("--batch-mix", f"{b}:1")]
    mixed = runner.invoke(cli, ["emit", example, "vllm", *mix])
    assert json.loads(mixed.stdout)["num_speculative_tokens"] >= 1


def test_emitted_config_states_its_minimum_vllm(runner: CliRunner, tmp_path: Path) -> None:
    from spectune.engines.vllm import SCHEDULE_MIN_VLLM

    f = write(tmp_path, **VARYING)
    rec = rec_of(**VARYING)
    res = runner.invoke(cli, ["emit", str(f), "vllm-yaml"])
    cfg = yaml.safe_load(res.stdout)["speculative-config"]
    if "num_speculative_tokens_per_batch_size" in cfg:
        assert f"# needs vLLM >= {SCHEDULE_MIN_VLLM} (num_speculative_tokens_per_batch_size)" in res.stdout
        assert f"needs vLLM >= {SCHEDULE_MIN_VLLM}" in res.stderr
    assert make_plan(rec).varies == ("num_speculative_tokens_per_batch_size" in cfg)
    py = runner.invoke(cli, ["emit", str(f), "vllm-python"])
    assert "# needs vLLM >= " in py.stdout


def test_emit_kinds_are_the_engine_modules_snippets() -> None:
    """`spectune emit`'s kinds are what the engine modules write, each kind one engine's."""
    from spectune.engines.emit import EMIT_KINDS
    from spectune.engines.registry import ENGINES, engine_of_snippet

    assert tuple(k for e in ENGINES.values() for k in e.SNIPPET_KINDS) == EMIT_KINDS
    assert {engine_of_snippet(k).NAME for k in EMIT_KINDS} == set(ENGINES)
    with pytest.raises(InputError, match="unknown snippet kind"):
        engine_of_snippet("lmdeploy")


def test_the_adaptive_config_is_a_file_without_notes() -> None:
    """The adaptive config is the content of a file: no note goes with it, not even that the
    profile prices another engine (the `sglang` flags carry that one)."""
    from spectune.core.recommend import recommend
    from spectune.documents.profiles import load_deployment

    example = EXAMPLES / "llama-3.1-70b-h100-eagle3.yaml"
    rec = recommend(load_deployment(str(example)))
    assert rec.deployment.engine.name == "vllm" and make_plan(rec).varies
    assert any("priced with the profile's engine 'vllm'" in n for n in build_snippet(rec, "sglang").notes)
    assert build_snippet(rec, "sglang-adaptive-config").notes == []


def test_the_command_line_offers_the_engine_modules_kinds() -> None:
    """The CLI spells the kinds and SGLang's adaptive-config file name out (importing the
    engines would slow `spectune --help`): they must stay the engine modules'."""
    import spectune.api as api
    from spectune.cli.main import cli
    from spectune.engines import sglang
    from spectune.engines.emit import EMIT_KINDS

    emit_cmd = cli.commands["emit"]
    kind = next(p for p in emit_cmd.params if p.name == "kind")
    path = next(p for p in emit_cmd.params if p.name == "adaptive_config_path")
    assert tuple(kind.type.choices) == EMIT_KINDS  # type: ignore[attr-defined]
    assert path.default == api.DEFAULT_ADAPTIVE_PATH == sglang.DEFAULT_ADAPTIVE_CONFIG
    rec_emit = next(p for p in cli.commands["recommend"].params if p.name == "emit_kind")
    assert set(rec_emit.type.choices) <= set(EMIT_KINDS)  # type: ignore[attr-defined]


def test_every_engine_says_the_static_fallback_in_its_own_terms(runner: CliRunner) -> None:
    """Where an engine cannot follow a per-batch gamma it gets one static value, and the one
    shared note (spectune.core.plan.static_notes) names it as that engine spells it."""
    for args, setting in ((["deepseek-v3-8xb200-trtllm-mtp", "trtllm", "--engine-version", "1.2.1"],
                           "max_draft_len"),
                          (["llama-3.1-70b-h100-eagle3", "vllm", "--engine-version", "0.20.0"], "K")):
        res = runner.invoke(cli, ["emit", *args])
        assert res.exit_code == 0, res.output
        assert f"emitting one static {setting} = " in res.stderr
        assert "the best mean predicted throughput over" in res.stderr
