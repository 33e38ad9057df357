"""Profile loading: a good inline profile loads; each kind of mistake gives one error that
names the file, the line, the key path and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from builders import DATA, profile

from spectune.base.errors import InputError
from spectune.documents.profiles import deployment_from_doc, parse_yaml


def load(data: dict, name: str = "p.yaml"):
    return deployment_from_doc(parse_yaml(yaml.safe_dump(data, sort_keys=False), name))


def error_of(data: dict) -> InputError:
    with pytest.raises(InputError) as exc:
        load(data)
    return exc.value


def test_good_profile_loads() -> None:
    dep = load(profile())
    assert dep.model.n_layers == 32 and dep.gpu.hbm_bandwidth == 3.35e12
    assert dep.engine.pass_overhead == pytest.approx(300e-6)
    assert dep.workload.batch_sizes == (1, 8)


def test_misspelt_key_names_line_and_suggests() -> None:
    data = profile()
    data["workload"] = {"batch_size": [1], "context_lengths": [1024]}
    err = error_of(data)
    text = yaml.safe_dump(data, sort_keys=False).splitlines()
    line = next(i + 1 for i, t in enumerate(text) if "batch_size:" in t)
    assert err.line == line and err.file == "p.yaml"
    assert "workload.batch_size" in str(err) and "did you mean 'batch_sizes'" in str(err)


def test_wrong_type_says_what_was_expected() -> None:
    err = error_of(profile(gamma_max="eight"))
    assert "gamma_max" in str(err) and "whole number" in str(err) and "'eight'" in str(err)


def test_acceptance_out_of_range() -> None:
    err = error_of(profile(acceptance={"per_position": [0.8, 1.4]}))
    assert "acceptance.per_position[1]" in str(err) and "expected a number <= 1, got 1.4" in str(err)


def test_acceptance_needs_exactly_one_form() -> None:
    err = error_of(profile(acceptance={"alpha": 0.7, "mean_length": 2.0}))
    assert "exactly one of" in str(err)


def test_mean_length_needs_drafts() -> None:
    err = error_of(profile(acceptance={"mean_length": 2.1}))
    assert "drafts" in str(err)


def test_bad_parallelism_is_explained() -> None:
    err = error_of(profile(parallelism={"tp": 2, "ep": 3}))
    assert "parallelism" in str(err) and "ep must be 1 or tp*dp" in str(err)


def test_unknown_drafter_kind_suggests() -> None:
    err = error_of(profile(drafter={"kind": "eagle4"}))
    assert "drafter.kind" in str(err) and "did you mean" in str(err)


def test_unknown_builtin_gpu() -> None:
    err = error_of(profile(gpu="h1000"))
    assert "unknown gpu 'h1000'" in str(err) and "spectune profiles list gpus" in str(err)


def test_yaml_syntax_error_has_line() -> None:
    with pytest.raises(InputError) as exc:
        parse_yaml("gpu: b200\nworkload: [1, 2\n", "broken.yaml")
    assert exc.value.file == "broken.yaml" and exc.value.line is not None
    assert "not valid YAML" in str(exc.value)


def test_marginal_acceptance_becomes_conditional() -> None:
    dep = load(profile(acceptance={"marginal": [0.8, 0.6, 0.3]}))
    assert dep.acceptance.rates == pytest.approx((0.8, 0.75, 0.5))


def test_config_json_path_relative_to_profile(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((DATA / "Llama-3.1-8B.json").read_text())
    data = profile(model={"config": "config.json", "dtypes": {"weights": "fp8"}})
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(data))
    from spectune.documents.profiles import load_deployment

    dep = load_deployment(str(f))
    assert dep.model.weight_dtype == "fp8" and dep.model.n_layers == 32


def test_bad_dtype_is_named() -> None:
    cfg = json.loads((DATA / "Llama-3.1-8B.json").read_text())
    err = error_of(profile(model={"hf_config": cfg, "dtypes": {"weights": "fp7"}}))
    assert "model.dtypes.weights" in str(err) and "fp7" in str(err)


def test_achievable_override_rescales_a_gpus_measured_kernels() -> None:
    """A profile's ``achievable:`` on a GPU with fitted kernel curves (B200) rescales them,
    as a calibration's fitted fractions do: B200's own fixed costs and GEMM shape stay
    (they used to be dropped for H100's), its bandwidth efficiencies move by new / old."""
    def gpu(extra: dict) -> object:
        doc = {"gpu": "b200", "model": "llama-3.1-8b", "drafter": "ngram",
               "acceptance": {"alpha": 0.6}, "workload": {"batch_sizes": [1], "context_lengths": [512]},
               **extra}
        return deployment_from_doc(parse_yaml(yaml.safe_dump(doc), "<test>")).gpu

    base = gpu({})
    half = gpu({"achievable": {"bandwidth_fraction": base.bandwidth_fraction / 2}})  # type: ignore[attr-defined]
    k, k2 = base.kernels, half.kernels  # type: ignore[attr-defined]
    assert k is not None and k2 is not None
    shape = ("gemm_call", "gemm_m_half", "gemm_flops_fraction", "moe_call", "gqa_call")
    assert [getattr(k2, n) for n in shape] == [getattr(k, n) for n in shape]
    for name in ("gemm_bandwidth_fraction", "moe_bandwidth_fraction", "gqa_bandwidth_fraction",
                 "mla_bandwidth_fraction"):
        assert getattr(k2, name) == pytest.approx(getattr(k, name) / 2), name
