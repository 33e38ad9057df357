"""Labels that are true (issue 19, item 5): acceptance says whether it was measured, stated
or assumed; a gain whose band reaches below 1.0x is marked marginal in every document and
table, and `check` gates it as docs/check.md says; the legend says how gamma* breaks ties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from click.testing import CliRunner, Result
from observe_support import SCRAPE, fixture_text

from spectune.cli.main import cli

WAYS = ("--alpha", "acceptance", "--observed", "--metrics-url", "--prometheus")
# An n-gram drafter whose gain is thin: at alpha 0.2, gamma* is 1 at batch 64 (about 1.1x,
# so more than the 3% check tolerance, but a band reaching below 1.0x) and 0 at batch 256.
THIN = {"drafter": {"kind": "ngram"}, "acceptance": {"alpha": 0.2},
        "workload": {"batch_sizes": [64, 256], "context_lengths": [1024]}}


def _write(tmp_path: Path, name: str = "p.yaml", **over: Any) -> Path:
    f = tmp_path / name
    body = profile(**over)
    if body.get("acceptance") is None:
        body.pop("acceptance", None)
    f.write_text(yaml.safe_dump(body, sort_keys=False))
    return f


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _json(res: Result) -> dict[str, Any]:
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


# --------------------------------------------------------------------------- assumed
def test_ngram_without_acceptance_is_labelled_assumed_everywhere(tmp_path: Path) -> None:
    prof = _write(tmp_path, acceptance=None)
    doc = _json(_run("recommend", str(prof), "-o", "json"))
    assert doc["acceptance"]["source"].startswith("assumed")
    assumed = [n for n in doc["notes"] if "ASSUMED" in n]
    assert len(assumed) == 1 and all(w in assumed[0] for w in WAYS)
    table = _run("recommend", str(prof))
    assert table.exit_code == 0, table.output
    header = next(ln for ln in table.stdout.splitlines() if ln.startswith("acceptance:"))
    assert header.startswith("acceptance: assumed")
    assert "acceptance ASSUMED" in table.stderr  # the note, on stderr
    quiet = _run("-q", "recommend", str(prof))
    assert "ASSUMED" not in quiet.stderr and "acceptance: assumed" in quiet.stdout


def test_the_prior_is_what_observe_measures_on_the_shipped_ngram_capture() -> None:
    """The prior's numbers carry their source: spectune's own reading of the capture."""
    from spectune.core.priors import ngram_prior
    from spectune.documents.exposition import parse_exposition
    from spectune.documents.window import Capture, Snapshot
    from spectune.engines.vllm import analyse
    from spectune.observe import observation_acceptance

    empty = parse_exposition('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 0\n')
    capture = Capture((Snapshot(0.0, empty), Snapshot(10.0, parse_exposition(fixture_text(SCRAPE)))),
                      "fixture", 10.0)
    measured = observation_acceptance(analyse(capture, "tiny-llama"))
    prior = ngram_prior()
    assert prior.rates == pytest.approx(measured.rates)
    assert (prior.origin, measured.origin) == ("assumed", "measured")


def test_alpha_option_replaces_the_prior_and_its_note(tmp_path: Path) -> None:
    prof = _write(tmp_path, acceptance=None)
    doc = _json(_run("recommend", str(prof), "--alpha", "0.6", "-o", "json"))
    assert doc["acceptance"]["source"] == "stated alpha (--alpha)"
    assert not any("ASSUMED" in n for n in doc["notes"])


def test_speedup_with_an_assumed_acceptance_says_so(tmp_path: Path) -> None:
    prof = _write(tmp_path, acceptance=None)
    res = _run("speedup", "--profile", str(prof), "--gamma", "3", "--batch", "8", "--context", "1024",
               "-o", "json")
    assert _json(res)["acceptance"].startswith("assumed")
    assert "acceptance ASSUMED" in res.stderr


# --------------------------------------------------------------------------- stated, never measured
@pytest.mark.parametrize("acceptance,form", [
    ({"alpha": 0.7}, "stated alpha"),
    ({"per_position": [0.8, 0.7, 0.6]}, "stated per-position (conditional)"),
    ({"marginal": [0.8, 0.56, 0.34]}, "stated per-position (marginal)"),
    ({"mean_length": 2.4, "drafts": 3}, "stated mean acceptance length"),
])
def test_acceptance_typed_into_a_profile_is_stated_never_measured(tmp_path: Path, acceptance: dict[str, Any],
                                                                  form: str) -> None:
    text = "measured on our vLLM, 2026-11-01"
    prof = _write(tmp_path, acceptance={**acceptance, "source": text}, gamma_max=6)
    doc = _json(_run("recommend", str(prof), "-o", "json"))
    src = doc["acceptance"]["source"]
    assert src.startswith(form) and src.endswith(": " + text)  # the profile's words, as its words
    for words in (doc["acceptance"]["extrapolation"] or "", *doc["notes"]):
        assert "acceptance measured" not in words


def test_a_profile_source_saying_stated_is_not_repeated(tmp_path: Path) -> None:
    words = "stated; measure yours with spectune observe"  # examples/llama-3.1-8b-h100-ngram.yaml
    prof = _write(tmp_path, acceptance={"alpha": 0.6, "source": words})
    src = _json(_run("recommend", str(prof), "-o", "json"))["acceptance"]["source"]
    assert src == "stated alpha: measure yours with spectune observe"


def test_check_warning_on_other_ngram_sizes_does_not_call_stated_acceptance_measured(tmp_path: Path) -> None:
    prof = _write(tmp_path, drafter={"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    serve = tmp_path / "serve.sh"
    serve.write_text("vllm serve llama-3.1-8b --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":1}'\n")
    doc = json.loads(_run("check", str(serve), "--profile", str(prof), "-o", "json").stdout)
    warning = next(w for w in doc["warnings"] if "prompt_lookup_min/max" in w)
    assert "measured" not in warning and "the profile's acceptance" in warning


def test_every_acceptance_source_starts_with_how_it_is_known() -> None:
    from spectune.core.acceptance import ALPHA_OPTION, ORIGINS, Acceptance

    assert Acceptance.iid(0.5, ALPHA_OPTION).origin == "stated"
    assert Acceptance.from_marginal([0.5]).origin == "stated"
    assert Acceptance.from_mean_length(2.0, 3).origin == "stated"
    assert Acceptance((0.5,), "our lab notebook").origin == "stated"  # never promoted to measured
    assert Acceptance((0.5,), "measured: vLLM at http://x/metrics, 2026-11-22T00:00:00Z + 60 s").origin \
        == "measured"
    assert set(ORIGINS) == {"measured", "stated", "assumed"}


# --------------------------------------------------------------------------- marginal gains
def _thin(tmp_path: Path) -> Path:
    return _write(tmp_path, "thin.yaml", **THIN)


def test_recommendation_points_carry_marginal_gain(tmp_path: Path) -> None:
    doc = _json(_run("recommend", str(_thin(tmp_path)), "-o", "json"))
    points = [p for p in doc["points"] if p["feasible"]]
    for p in points:
        assert p["marginal_gain"] == (p["speculate"] and p["speedup_low"] < 1.0)
    assert any(p["marginal_gain"] for p in points)  # the case is not vacuous
    keys = list(points[0])
    assert keys.index("speedup_high") + 1 == keys.index("marginal_gain") == keys.index("speculate") - 1


def test_the_table_marks_marginal_points_with_a_legend(tmp_path: Path) -> None:
    prof = _thin(tmp_path)
    doc = _json(_run("recommend", str(prof), "-o", "json"))
    n = sum(p.get("marginal_gain", False) for p in doc["points"])
    for variant in ([], ["--detail"]):
        out = _run("recommend", str(prof), *variant).stdout
        body = out.split("\n\n")[1]  # the grid, between the header and the legend
        assert body.count("†") == n
        assert any(ln.startswith("† marginal gain") and "check" in ln for ln in out.splitlines())


def test_no_mark_and_no_marginal_legend_without_a_marginal_point(tmp_path: Path) -> None:
    prof = _write(tmp_path, acceptance={"alpha": 0.8})
    doc = _json(_run("recommend", str(prof), "-o", "json"))
    assert all(p["marginal_gain"] is False for p in doc["points"] if p["feasible"])
    out = _run("recommend", str(prof)).stdout
    assert "†" not in out and "marginal gain" not in out


def test_the_legend_says_how_gamma_star_breaks_ties(tmp_path: Path) -> None:
    prof = _write(tmp_path, tie_tolerance=0.05)
    for variant in ([], ["--detail"]):
        out = _run("recommend", str(prof), *variant).stdout
        assert "γ* is the smallest γ whose predicted speedup is within the tie tolerance (5%) of the best" \
            in out


def test_speedup_document_carries_marginal_gain(tmp_path: Path) -> None:
    prof = _thin(tmp_path)
    doc = _json(_run("speedup", "--profile", str(prof), "--gamma", "1", "--batch", "64", "--context", "1024",
                     "-o", "json"))
    assert doc["marginal_gain"] == (doc["speedup_low"] < 1.0)
    off = _json(_run("speedup", "--profile", str(prof), "--gamma", "0", "--batch", "64", "--context",
                     "1024", "-o", "json"))
    assert off["marginal_gain"] is False  # gamma 0 speculates nothing


def _properties_named(node: Any, key: str) -> list[Any]:
    """Every schema of a property called ``key``, anywhere in ``node``."""
    if isinstance(node, list):
        return [x for v in node for x in _properties_named(v, key)]
    if not isinstance(node, dict):
        return []
    own = [node["properties"][key]] if key in node.get("properties", {}) else []
    return own + [x for v in node.values() for x in _properties_named(v, key)]


@pytest.mark.parametrize("kind", ["Recommendation", "Speedup", "CheckReport", "CheckSet", "FleetReport"])
def test_published_schemas_include_marginal_gain(kind: str) -> None:
    res = _run("schema", kind)
    assert res.exit_code == 0, res.output
    found = _properties_named(json.loads(res.stdout), "marginal_gain")
    assert found and all(f["type"] == "boolean" and "1.0" in f["description"] for f in found)


# --------------------------------------------------------------------------- check and marginal gains
def _serve(tmp_path: Path, gamma: int | None) -> Path:
    f = tmp_path / "serve.sh"
    spec = "" if gamma is None else \
        f" --speculative-config '{{\"method\":\"ngram\",\"num_speculative_tokens\":{gamma}}}'"
    f.write_text(f"vllm serve llama-3.1-8b{spec}\n")
    return f


def _check(tmp_path: Path, gamma: int | None, *extra: str) -> Result:
    return _run("check", str(_serve(tmp_path, gamma)), "--profile", str(_thin(tmp_path)), *extra)


def test_check_does_not_fail_speculation_off_at_a_marginal_point(tmp_path: Path) -> None:
    res = _check(tmp_path, None, "-o", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    marginal = [p for p in doc["points"] if p["marginal_gain"]]
    # not vacuous: off leaves more than the tolerance at a marginal point, which used to fail
    assert any(p["shortfall"] > doc["tolerance"] for p in marginal)
    assert all(p["ok"] for p in doc["points"]) and doc["verdict"] == "pass"
    note = next(n for n in doc["notes"] if n.startswith("marginal gain at"))
    assert "does not fail" in note and "not count" in note and "certain win" in note
    assert "marginal gain held only to no slowdown" in doc["summary"]


def test_check_still_fails_a_slowdown_at_a_marginal_point(tmp_path: Path) -> None:
    res = _check(tmp_path, 8, "-o", "json")
    doc = json.loads(res.stdout)
    slow = [p for p in doc["points"] if p["slows_down"] and p["marginal_gain"]]
    assert slow and all(not p["ok"] for p in slow)
    assert res.exit_code == 1 and doc["verdict"] == "fail"


def test_check_table_marks_marginal_points(tmp_path: Path) -> None:
    out = _check(tmp_path, None).stdout
    assert "ok †" in out and any(ln.startswith("† marginal gain") for ln in out.splitlines())
    md = _check(tmp_path, None, "-o", "markdown").stdout
    assert "|\n\n† marginal gain" in md  # a blank line: GitHub would take a glued line as a table row


def test_check_help_and_docs_say_how_marginal_points_are_gated() -> None:
    helptext = " ".join(_run("check", "--help").stdout.split())
    assert "marginal gain" in helptext and "fails only when speculation slows it down" in helptext
    docs = (Path(__file__).resolve().parents[1] / "docs" / "check.md").read_text(encoding="utf-8")
    assert "**Marginal gains.**" in docs and "marginal_gain: true" in docs


def test_report_marks_marginal_points_and_says_the_tie_rule(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    prof = _thin(tmp_path)
    doc = _json(_run("recommend", str(prof), "-o", "json"))
    res = _run("report", str(prof))
    assert res.exit_code == 0, res.output
    page = res.stdout
    assert page.count(" †</span>") == sum(p.get("marginal_gain", False) for p in doc["points"]) > 0
    assert "† marginal gain" in page and "γ* is the smallest γ whose predicted speedup" in page
