"""SGLang runs at most 48 requests at once while it speculates unless launched with
``--max-running-requests`` (engine key ``spec_max_running_requests``): ``recommend`` prices the
speculative arm above it with 48 running and the rest queued (spectune/core/queueing.py),
``emit`` suggests or emits the flag, ``check`` reads it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.queueing import capped, queued
from spectune.core.recommend import recommend
from spectune.core.speedup import speedup_grid
from spectune.documents.profiles import load_deployment
from spectune.documents.validation import capped_latency, serving_latency

CAP = 48  # sglang 0.5.23 speculative_hook.py: "Max running requests is reset to 48"
SGLANG_PROFILE = {
    "name": "llama-sglang", "gpu": "h100-sxm", "model": "llama-3.1-8b", "drafter": "eagle3-llama-3.1-8b",
    "engine": "sglang", "workload": {"batch_sizes": [1, 16, 48, 64, 128], "context_lengths": [1024, 8192]},
    "acceptance": {"alpha": 0.8}, "gamma_max": 4}


def _profile(tmp_path: Path, name: str = "p", **over: object) -> str:
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({**SGLANG_PROFILE, **over}), encoding="utf-8")
    return str(f)


def _uncapped(tmp_path: Path, **over: object) -> str:
    return _profile(tmp_path, "free", engine={"base": "sglang", "spec_max_running_requests": 0}, **over)


def test_the_builtin_sglang_engines_carry_the_cap() -> None:
    from spectune.documents.profiles import load_engine

    for name in ("sglang", "sglang-rocm", "sglang-h200-2025-03"):
        assert load_engine(name).spec_max_running == CAP
    assert load_engine("vllm").spec_max_running == 0  # vLLM has no such speculative default


@pytest.mark.parametrize("lengths", [{}, {"prompt_tokens": 2000, "output_tokens": 250}])
def test_the_capped_arm_is_the_throughput_at_the_cap_over_plain_at_the_batch(
        tmp_path: Path, lengths: dict[str, int]) -> None:
    wl = {**SGLANG_PROFILE["workload"], **lengths}  # type: ignore[dict-item]
    dep = load_deployment(_profile(tmp_path, workload=wl))
    free = speedup_grid(dep)
    got = capped(dep, free).speedup
    at = speedup_grid(dep, batch=[CAP])
    # Sp_cap(B, g) = Sp(R, g) * [R / C0(R)] / [B / C0(B)], computed here from the two grids
    B = free.batch.astype(float)[:, None, None]
    want = at.speedup * (CAP / at.c0[..., None]) / (B / free.c0[..., None])
    over = free.batch > CAP
    assert np.allclose(got[over][..., 1:], want[over][..., 1:], rtol=1e-12)
    assert np.array_equal(got[~over], free.speedup[~over])  # at or below the cap: untouched
    assert np.array_equal(got[..., 0], free.speedup[..., 0])  # plain decode is never capped
    assert (got[over][..., 1:] < free.speedup[over][..., 1:]).all()  # queueing only costs
    # the same queue as validation prices on end-to-end latency: Little's law, B / R
    assert np.array_equal(queued([16, 48, 64, 128], CAP), [1.0, 1.0, 64 / 48, 128 / 48])
    per_token = np.linspace(0.01, 0.02, 128)
    assert capped_latency(0.1, per_token, 200, 128, float("inf"), CAP) == pytest.approx(
        serving_latency(0.1, per_token[:CAP], 200, CAP, float("inf")) * float(queued(128, CAP)))


def test_no_cap_or_no_batch_above_it_leaves_the_grid_alone(tmp_path: Path) -> None:
    free_dep = load_deployment(_uncapped(tmp_path))
    grid = speedup_grid(free_dep)
    assert capped(free_dep, grid) is grid
    small = load_deployment(_profile(tmp_path, workload={"batch_sizes": [1, 48], "context_lengths": [1024]}))
    grid = speedup_grid(small)
    assert capped(small, grid) is grid
    assert not any("at most 48 requests" in n for n in recommend(small).notes)


def test_recommend_prices_the_cap_and_says_so(tmp_path: Path) -> None:
    dep = load_deployment(_profile(tmp_path))
    rec, free = recommend(dep), recommend(load_deployment(_uncapped(tmp_path)))
    over = rec.grid.batch > CAP
    assert (rec.speedup_star[over] < free.speedup_star[over]).all()
    assert np.array_equal(rec.speedup_star[~over], free.speedup_star[~over])
    note = next(n for n in rec.notes if "at most 48 requests" in n)
    assert "at batch 64, 128 the speculative arm is priced with 48 running and the rest queued" in note
    assert "spec_max_running_requests: 0" in note
    assert not any("at most 48 requests" in n for n in free.notes)
    # the cap turns speculation off at 128 here; the note names a point it moved
    assert rec.gamma_star[-1, 0] == 0 < free.gamma_star[-1, 0]
    assert "the cap changes gamma* at" in note and "uncapped" in note


def test_emit_suggests_the_flag_when_the_table_speculates_above_the_cap(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["emit", _profile(tmp_path), "sglang"])
    assert res.exit_code == 0, res.output
    assert "--max-running-requests" not in res.stdout  # priced with SGLang's cap: the flags run as priced
    assert "the recommendation speculates at batch 64, above the 48 requests" in res.stderr
    assert "--max-running-requests 128 runs them all" in res.stderr
    assert "turns speculation off at batch 128, but SGLang speculating without --max-running-requests" \
        in res.stderr
    # priced without the cap: the flag is emitted, so the server runs what was priced
    res = CliRunner().invoke(cli, ["emit", _uncapped(tmp_path), "sglang"])
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip().endswith("--max-running-requests 128")
    # no batch above the cap: nothing to say
    small = _profile(tmp_path, "small", workload={"batch_sizes": [1, 16, 48], "context_lengths": [1024]})
    res = CliRunner().invoke(cli, ["emit", small, "sglang"])
    assert "--max-running-requests" not in res.stdout + res.stderr


SGL = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
       "--speculative-algorithm EAGLE3 --speculative-draft-model-path x --speculative-num-steps 3 "
       "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


def _check(tmp_path: Path, extra: str, prof: str) -> tuple[dict, str]:
    f = tmp_path / "run.sh"
    f.write_text(f"{SGL} {extra}\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", prof, "-o", "json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout), res.stderr


def test_check_prices_the_cap_the_command_sets(tmp_path: Path) -> None:
    prof = _uncapped(tmp_path)  # whatever the profile says, the command decides
    def configured(doc: dict) -> dict[int, float]:
        return {p["batch"]: p["configured_speedup"] for p in doc["points"] if p["context"] == 1024}

    default, _ = _check(tmp_path, "", prof)
    lifted, warned = _check(tmp_path, "--max-running-requests 256", prof)
    assert configured(default)[128] < configured(lifted)[128]
    assert configured(default)[16] == configured(lifted)[16]
    assert "--max-running-requests" not in warned
    low, warned = _check(tmp_path, "--max-running-requests 32", prof)
    assert "--max-running-requests 32 is below the profile's batch size 128" in warned
    assert configured(low) == configured(lifted)


@pytest.mark.parametrize("value", ["0", "nan", "-5", "1e99", "many"])
def test_a_bad_max_running_requests_is_refused(tmp_path: Path, value: str) -> None:
    f = tmp_path / "run.sh"
    f.write_text(f"{SGL} --max-running-requests {value}\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", _profile(tmp_path)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert f"{f}:1: --max-running-requests must be" in res.stderr


@pytest.mark.parametrize("value", [-1, 1.5, "48", True])
def test_a_bad_profile_key_names_file_line_and_key(tmp_path: Path, value: object) -> None:
    prof = _profile(tmp_path, engine={"base": "sglang", "spec_max_running_requests": value})
    with pytest.raises(InputError) as exc:
        load_deployment(prof)
    assert exc.value.key == "engine.spec_max_running_requests" and exc.value.file == prof


def test_the_key_overrides_like_any_engine_key(tmp_path: Path) -> None:
    dep = load_deployment(_profile(tmp_path, engine={"base": "sglang", "spec_max_running_requests": 64}))
    assert dep.engine.spec_max_running == 64
    grid = speedup_grid(dep)
    assert np.array_equal(capped(dep, grid).speedup[:4], grid.speedup[:4])  # batches up to 64 run
    assert not np.array_equal(capped(dep, grid).speedup[4], grid.speedup[4])
    assert capped(replace(dep, engine=replace(dep.engine, spec_max_running=0)), grid) is grid
