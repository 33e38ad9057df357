"""What the user sees: the HTML report, the recommendation table (legend, band, infeasible
points, --detail), completion, --quiet, bare `spectune`, examples and documents by name."""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.recommend import recommend
from spectune.documents.profiles import example_names, load_deployment
from spectune.documents.results import recommendation_doc
from spectune.render.formats import _clean, render

EXAMPLE = "llama-3.1-70b-h100-eagle3"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


class Cells(HTMLParser):
    """The heatmap's <td data-batch ...> cells and every tag that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.fetching: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-batch" in a:
            self.cells.append(a)
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.fetching.append(tag)
        for k in ("src", "href"):
            if a.get(k, "").split(":")[0] in ("http", "https", "file", "data"):
                self.fetching.append(f"{tag} {k}={a[k]}")


def parse(html: str) -> Cells:
    p = Cells()
    p.feed(html)
    return p


def heatmap_matches(cells: list[dict[str, str]], doc: dict[str, Any]) -> None:
    """Every point of the recommendation is one heatmap cell with its gamma and speedup."""
    assert len(cells) == len(doc["points"])
    by = {(int(c["data-batch"]), int(c["data-context"])): c for c in cells}
    for p in doc["points"]:
        c = by[(p["batch"], p["context"])]
        if not p["feasible"]:  # does not fit in memory: marked, no gamma
            assert c["class"] == "infeasible" and c["data-gamma"] == ""
            continue
        assert int(c["data-gamma"]) == p["gamma"]
        assert float(c["data-speedup"]) == pytest.approx(p["speedup"], rel=1e-9)
        assert ("off" in c["class"]) == (p["gamma"] == 0)


def test_report_heatmap_matches_recommend_json(runner: CliRunner) -> None:
    pytest.importorskip("matplotlib")
    # an example with both 'off' and speculating cells (MoE at batch on B200: speculation stops
    # paying at large batch)
    name = "qwen3.6-35b-a3b-b200-mtp"
    rec_json = runner.invoke(cli, ["recommend", name, "-o", "json"])
    page = runner.invoke(cli, ["report", name])
    assert rec_json.exit_code == 0 and page.exit_code == 0, page.output
    doc = json.loads(rec_json.stdout)
    parsed = parse(page.stdout)
    heatmap_matches(parsed.cells, doc)
    # both kinds are drawn
    assert {"off", "spec"} <= {c["class"] for c in parsed.cells}
    assert parsed.fetching == []  # nothing is fetched when the page is viewed
    assert page.stdout.count("<svg") == 3  # curves, cost ledger, acceptance
    for text in ("Why γ* moves", "marginal cost", "Acceptance per draft position", "Inputs and"):
        assert text in page.stdout
    # the deployment section carries exactly what `spectune emit PROFILE vllm` prints
    import html

    emitted = runner.invoke(cli, ["emit", name, "vllm"]).stdout.strip()
    assert f"--speculative-config '{emitted}'" in html.unescape(page.stdout)


def test_report_deploys_for_the_engine_the_profile_prices(runner: CliRunner) -> None:
    """An SGLang profile (a tree drafter vLLM cannot run) gets SGLang's flags, exactly as
    `recommend --emit sglang` prints them."""
    pytest.importorskip("matplotlib")
    import html

    name = "llama-3.1-8b-h100-eagle2-sglang"
    page = runner.invoke(cli, ["report", name])
    flags = runner.invoke(cli, ["recommend", name, "--emit", "sglang"]).stdout.strip()
    assert page.exit_code == 0 and flags.startswith("--speculative-algorithm")
    assert "What to deploy (SGLang)" in page.stdout
    assert f"sglang.launch_server --model-path MODEL {flags}" in html.unescape(page.stdout)


def test_report_ledger_adds_up_to_the_recommendation() -> None:
    """The ledger's speculative step is the recommendation's: verify components plus drafter
    over C0 and m(gamma) give the same speedup as `recommend`, each component's plain cost is
    what `cost --tokens 1` prices, and the sentence names the largest additions."""
    from spectune.core.cost import step_cost
    from spectune.render.report import extra_costs, ledger_steps, why_sentence

    for example in (EXAMPLE, "qwen3-30b-a3b-h100-eagle3"):
        dep = load_deployment(example)
        rec = recommend(dep)
        doc = _clean(recommendation_doc(rec))
        s = doc["context_lengths"][0]
        steps = ledger_steps(rec, doc, s, doc["batch_sizes"])
        pts = {(p["batch"], p["context"]): p for p in doc["points"]}
        for st in steps:
            p = pts[(st["batch"], s)]
            assert st["gamma"] == max(p["gamma"], 1) and st["tokens"] == st["gamma"] + 1
            spec = st["total_seconds"] + st["draft_seconds"]
            gain = st["expected_tokens"] * st["plain_seconds"] / spec
            assert st["speedup"] == pytest.approx(gain, rel=1e-4)
            assert st["speedup"] == pytest.approx(p["speedups"][st["gamma"]], rel=1e-3)
            assert st["plain_seconds"] == pytest.approx(p["plain_step_seconds"], rel=1e-3)  # 4 digits
            plain = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, st["batch"], 1, s)
            assert sum(c["plain_seconds"] for c in st["components"]) == pytest.approx(
                float(plain.seconds), rel=1e-4)
            top = extra_costs(st)[0]
            assert f"{top[0]} +{top[1] * 1e3:.2f} ms" in why_sentence([st])
        assert any(not st["gamma_star"] for st in steps) == any(
            pts[(b, s)].get("gamma") == 0 for b in doc["batch_sizes"])


def test_report_without_matplotlib_says_how_to_install(runner: CliRunner,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    res = runner.invoke(cli, ["report", EXAMPLE])
    assert res.exit_code == 2
    root = Path(__file__).resolve().parents[1]  # tests run from a checkout (a wheel: test_newcomer.py)
    assert f"pip install -e '.[report]' (in {root})" in res.stderr
    assert "Traceback" not in res.output


def band_and_infeasible_doc() -> dict[str, Any]:
    """A recommendation document as the kernel-true-cost and feasibility changes write it:
    a band on every feasible point, one point infeasible (no gamma, no speedup)."""
    doc = _clean(recommendation_doc(recommend(load_deployment(EXAMPLE))))
    for p in doc["points"]:
        if not p["feasible"]:
            continue
        p["speedup_low"] = round(p["speedup"] * 0.9, 4)
        p["speedup_high"] = round(p["speedup"] * 1.1, 4)
    last = [p for p in doc["points"] if p["feasible"]][-1]
    for k in ("gamma", "speedup", "speedup_low", "speedup_high", "speedups", "step_seconds", "limiter"):
        last.pop(k, None)
    last.update({"feasible": False, "speculate": False, "reason": "KV cache does not fit in HBM"})
    return doc


def test_table_shows_band_and_marks_infeasible_points() -> None:
    doc = band_and_infeasible_doc()
    text = render(doc, "table")
    p = doc["points"][0]
    assert f"{p['gamma']}  {p['speedup']:.2f}× ({p['speedup_low']:.2f}–{p['speedup_high']:.2f})" in text
    mark = next(ln.split()[0] for ln in text.splitlines() if ln.endswith("KV cache does not fit in HBM"))
    assert f"—  {mark}" in text
    assert "(low–high) = the range that held" in text
    detail = render(doc, "table", variant="detail")
    assert "KV cache does not fit" in detail


def test_report_renders_band_and_infeasible_cells() -> None:
    pytest.importorskip("matplotlib")
    from spectune.render.report import report_html

    doc = band_and_infeasible_doc()
    rec = recommend(load_deployment(EXAMPLE))
    page = report_html(rec, doc)
    cells = parse(page).cells
    bad = [c for c in cells if c["class"] == "infeasible"]
    hbm = [c for c in bad if "HBM" in c["title"]]
    assert len(hbm) == 1 and hbm[0]["data-gamma"] == ""
    assert len(bad) == 1 + sum(not p["feasible"] for p in doc["points"] if "HBM" not in p.get("reason", ""))
    p = doc["points"][0]
    assert f"({p['speedup_low']:.2f}–{p['speedup_high']:.2f})" in page
    assert "the prediction's band" in page


def test_table_without_band_shows_none() -> None:
    doc = _clean(recommendation_doc(recommend(load_deployment(EXAMPLE))))
    for p in doc["points"]:  # a document without the prediction band (older producers)
        p.pop("speedup_low", None)
        p.pop("speedup_high", None)
    text = render(doc, "table")
    assert "–" not in text.split("\n\n")[1]  # no band in the grid: none was computed
    legend = next(ln for ln in text.splitlines() if ln.startswith("cell: γ* (best draft length)"))
    assert "low–high" not in legend


def test_detail_rows_agree_with_the_document(runner: CliRunner) -> None:
    """TPOT = step time / tokens per verify, tok/s = batch / TPOT, from the JSON's numbers."""
    doc = json.loads(runner.invoke(cli, ["recommend", EXAMPLE, "-o", "json"]).stdout)
    res = runner.invoke(cli, ["recommend", EXAMPLE, "--detail"])
    assert res.exit_code == 0
    m = doc["acceptance"]["expected_tokens"]
    rows = [ln for ln in res.stdout.splitlines() if ln[:1].isdigit()]
    assert len(rows) == len(doc["points"])
    for row, p in zip(rows, doc["points"], strict=True):
        if not p["feasible"]:
            assert "—" in row
            continue
        tpot = p["step_seconds"] / m[p["gamma"]]
        assert f"  {tpot * 1e3:.2f}  " in row and f"  {p['batch'] / tpot:,.0f}  " in row
        assert row.split()[-1] == p["limiter"]


def test_no_internal_names_in_what_the_user_reads(runner: CliRunner) -> None:
    examples = [["recommend", name, "--detail"] for name in example_names()]
    for args in (*examples, ["recommend", "deepseek-v4-flash-b200-mtp"], ["recommend", "--help"],
                 ["speedup", "--alpha", "0.7", "--gamma", "3"], ["cost", "--help"], ["--help"],
                 ["speedup", "--help"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, (args, res.output)
        for private in ("seed 0", "shared/", "seeds/"):
            assert private not in res.output, (args, private)


def test_bare_spectune_prints_help_and_exits_0(runner: CliRunner) -> None:
    res = runner.invoke(cli, [], prog_name="spectune")
    assert res.exit_code == 0
    assert "Usage: spectune" in res.stdout and "recommend" in res.stdout


def test_quiet_drops_notes(runner: CliRunner) -> None:
    loud = runner.invoke(cli, ["recommend", EXAMPLE])
    quiet = runner.invoke(cli, ["recommend", EXAMPLE, "--quiet"])
    assert "spectune: note:" in loud.stderr
    assert quiet.stderr == "" and quiet.stdout == loud.stdout
    assert runner.invoke(cli, ["-q", "recommend", EXAMPLE]).stderr == ""
    assert "spectune: note:" in runner.invoke(cli, ["recommend", EXAMPLE]).stderr  # not sticky


def complete(runner: CliRunner, line: str) -> list[str]:
    words = line.split(" ")
    res = runner.invoke(cli, [], prog_name="spectune",
                        env={"_SPECTUNE_COMPLETE": "bash_complete", "COMP_WORDS": line,
                             "COMP_CWORD": str(len(words) - 1)})
    assert res.exit_code == 0, res.output
    return [ln.split(",", 1)[1] for ln in res.stdout.splitlines()]


def test_completion_of_names(runner: CliRunner) -> None:
    assert EXAMPLE in complete(runner, "spectune profiles show llama-3.1-70b")
    assert "llama-3.1-70b" in complete(runner, "spectune profiles show llama-3.1-70b")
    assert {"b200", "b300"} <= set(complete(runner, "spectune cost --gpu b"))
    assert "deepseek-v4-flash" in complete(runner, "spectune cost --model deepseek")
    assert "ngram" in complete(runner, "spectune speedup --drafter ng")
    assert set(complete(runner, "spectune recommend qwen3")) >= {"qwen3-30b-a3b-h100-eagle3"}
    assert {"recommend", "report"} <= set(complete(runner, "spectune re"))
    assert "--detail" in complete(runner, "spectune recommend x --de")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(runner: CliRunner, shell: str) -> None:
    res = runner.invoke(cli, ["completion", shell])
    assert res.exit_code == 0 and "_SPECTUNE_COMPLETE" in res.stdout


def test_examples_and_docs_by_name_from_any_directory(runner: CliRunner, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    by_name = runner.invoke(cli, ["recommend", EXAMPLE, "-o", "json"])
    by_path = runner.invoke(cli, ["recommend", f"examples/{EXAMPLE}.yaml", "-o", "json"])
    assert by_name.exit_code == 0 and by_name.stdout == by_path.stdout
    shown = runner.invoke(cli, ["profiles", "show", EXAMPLE])
    assert shown.exit_code == 0 and yaml.safe_load(shown.stdout)["name"] == EXAMPLE
    assert EXAMPLE in example_names()
    docs = runner.invoke(cli, ["docs"])
    assert "schema" in docs.stdout.split()
    schema_doc = runner.invoke(cli, ["docs", "schema"])
    assert schema_doc.exit_code == 0 and "Recommendation" in schema_doc.stdout
    missing = runner.invoke(cli, ["profiles", "show", "no-such-thing"])
    assert missing.exit_code == 2


def test_report_of_an_inline_profile(runner: CliRunner, tmp_path: Path) -> None:
    """A profile with no built-in parts still reports (no sources to show, no crash)."""
    pytest.importorskip("matplotlib")
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(workload={"batch_sizes": [1, 64], "context_lengths": [1024]})))
    res = runner.invoke(cli, ["report", str(f)])
    assert res.exit_code == 0, res.output
    assert len(parse(res.stdout).cells) == 2


def test_wide_terminal_cells_carry_tpot_and_limiter(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import shutil

    from spectune.cli import options as cli_module

    doc = _clean(recommendation_doc(recommend(load_deployment(EXAMPLE))))
    wide = render(doc, "table", variant="wide")
    m = doc["acceptance"]["expected_tokens"]
    p = doc["points"][0]
    assert f"{p['step_seconds'] / m[p['gamma']] * 1e3:.2f} ms  {p['limiter']}" in wide
    assert "time per output token" in wide
    # chosen only for a terminal wide enough; never for pipes, files or other formats
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((200, 50)))
    assert cli_module.table_variant(False, "table", 3) == "wide"
    assert cli_module.table_variant(False, "table", 6) == ""
    assert cli_module.table_variant(False, "json", 3) == ""
    assert cli_module.table_variant(True, "table", 3) == "detail"
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert cli_module.table_variant(False, "table", 3) == ""


def test_report_with_an_observation_matches_recommend(runner: CliRunner, tmp_path: Path) -> None:
    """--observed feeds the report exactly as it feeds recommend (real vLLM scrape fixture)."""
    pytest.importorskip("matplotlib")
    from test_observe_documents import _fixture_observation

    obs = tmp_path / "obs.yaml"
    obs.write_text(render(_fixture_observation().to_dict(), "yaml"))
    rec_json = runner.invoke(cli, ["recommend", EXAMPLE, "--observed", str(obs), "-o", "json"])
    page = runner.invoke(cli, ["report", EXAMPLE, "--observed", str(obs)])
    assert rec_json.exit_code == 0 and page.exit_code == 0, page.output
    doc = json.loads(rec_json.stdout)
    heatmap_matches(parse(page.stdout).cells, doc)
    assert "127.0.0.1:8000" in doc["acceptance"]["source"]
    assert "127.0.0.1:8000" in page.stdout  # the acceptance section names the observed server
