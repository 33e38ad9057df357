"""Overlap (async) scheduling an engine keeps for plain decoding but drops for a drafter kind
(vLLM >= 0.14.0 with n-gram): not priced, but every recommendation it applies to says its
speedup is optimistic (profiles/engines/vllm.yaml ``overlap_scheduling``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import spectune.api as api
from spectune.base.errors import InputError
from spectune.documents.profiles import load_engine
from spectune.engines.engine_version import overlap_note

ROOT = Path(__file__).resolve().parents[1]
NGRAM = ROOT / "examples" / "llama-3.1-8b-h100-ngram.yaml"
EAGLE3 = ROOT / "examples" / "llama-3.1-70b-h100-eagle3.yaml"


def _overlap_notes(notes: tuple[str, ...]) -> list[str]:
    return [n for n in notes if "async scheduling" in n]


def test_vllm_profile_says_ngram_runs_without_async_scheduling_from_0_14() -> None:
    eng = load_engine("vllm")
    assert eng.overlap_since == "0.14.0"  # vLLM v0.14.0 release notes, vllm-project/vllm#27614
    assert eng.overlap_without == ("ngram",)
    assert eng.overlap_not_on == ("cpu",)  # vllm/platforms/cpu.py turns it off for every arm
    note = overlap_note(eng, "ngram", "h100-sxm")
    assert note is not None and "0.14.0" in note and "optimistic" in note


@pytest.mark.parametrize(("version", "kind", "gpu", "noted"), [
    ("0.32.0", "ngram", "h100-sxm", True),
    ("0.14.0", "ngram", "h100-sxm", True),
    ("0.13.0", "ngram", "h100-sxm", False),  # both arms synchronous before 0.14.0
    ("0.10", "ngram", "h100-sxm", False),
    ("", "ngram", "h100-sxm", True),  # unknown: the current release
    ("nightly", "ngram", "h100-sxm", True),  # unreadable: the current release
    ("0.32.0", "eagle3", "h100-sxm", False),  # EAGLE/MTP keep it (vllm-project/vllm#31998)
    ("0.32.0", "draft_model", "h100-sxm", False),
    ("0.32.0", "ngram", "cpu", False),  # a CPU host runs every arm without it
])
def test_overlap_note_by_version_kind_and_host(version: str, kind: str, gpu: str, noted: bool) -> None:
    eng = replace(load_engine("vllm"), version=version)
    assert (overlap_note(eng, kind, gpu) is not None) is noted


def test_engines_without_the_key_never_note() -> None:
    for name in ("sglang", "trtllm"):
        assert overlap_note(load_engine(name), "ngram", "h100-sxm") is None


def test_recommendation_notes_it_for_ngram_on_current_vllm_only() -> None:
    now = api.tune(NGRAM).recommendation
    assert len(_overlap_notes(now.notes)) == 1
    old = api.tune(NGRAM, engine_version="0.13.0").recommendation
    assert _overlap_notes(old.notes) == []
    eagle = api.tune(EAGLE3).recommendation
    assert _overlap_notes(eagle.notes) == []


def _profile(tmp_path: Path, engine: str) -> Path:
    text = NGRAM.read_text()
    assert "\nengine: vllm\n" in text
    p = tmp_path / "p.yaml"
    p.write_text(text.replace("\nengine: vllm\n", f"\nengine: {engine}\n"))
    return p


def test_a_profile_may_override_it(tmp_path: Path) -> None:
    p = _profile(tmp_path, "{base: vllm, overlap_scheduling: {since: '0.14.0', without: []}}")
    assert _overlap_notes(api.tune(p).recommendation.notes) == []


def test_an_unknown_drafter_kind_is_an_input_error(tmp_path: Path) -> None:
    p = _profile(tmp_path, "{base: vllm, overlap_scheduling: {without: [ngrma]}}")
    with pytest.raises(InputError) as err:
        api.tune(p)
    assert "without" in str(err.value)
