"""The HTML report in a real browser: Debian's Chromium, headless, driven by Playwright's
Python client (no browser download: ``executable_path`` points at /usr/bin/chromium).

Loads ``spectune report`` output from a file with networking off, asserts no console
error, no page error and no request leaving the file, compares every heatmap cell the
browser lays out with ``recommend -o json``, and keeps a screenshot
(``$SPECTUNE_ARTIFACTS`` or ``.ci/work/artifacts``/report.png). ``scripts/ci_report.sh``
installs Chromium and runs these tests in CI.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from spectune.cli.main import cli

CHROMIUM = os.environ.get("SPECTUNE_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("SPECTUNE_ARTIFACTS", ROOT / ".ci" / "work" / "artifacts"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)),
                       reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
]


@pytest.mark.parametrize("example", ["qwen3-30b-a3b-h100-eagle3", "llama-3.1-70b-h100-eagle3"])
def test_report_renders_in_chromium(example: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sync_api = pytest.importorskip("playwright.sync_api")
    runner = CliRunner()
    page_res = runner.invoke(cli, ["report", example])
    rec_res = runner.invoke(cli, ["recommend", example, "-o", "json"])
    assert page_res.exit_code == 0 and rec_res.exit_code == 0, page_res.output
    doc = json.loads(rec_res.stdout)
    html_file = tmp_path / "report.html"
    html_file.write_text(page_res.stdout, encoding="utf-8")

    errors: list[str] = []
    outside: list[str] = []
    with sync_api.sync_playwright() as pw:
        # a fresh --user-data-dir per run: no state from any earlier browser session
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=FLAGS, viewport={"width": 1200, "height": 900}, offline=True)
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith("file://") else outside.append(r.url))
        page.goto(html_file.as_uri())
        page.wait_for_load_state("load")
        cells = page.eval_on_selector_all(
            "#heatmap td[data-batch]",
            "els => els.map(e => ({batch: +e.dataset.batch, context: +e.dataset.context, "
            "gamma: e.dataset.gamma, speedup: e.dataset.speedup, cls: e.className, "
            "text: e.innerText, w: e.getBoundingClientRect().width}))")
        figures = page.eval_on_selector_all("svg", "els => els.map(e => e.getBoundingClientRect().width)")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / ("report.png" if example.startswith("qwen3") else f"report-{example}.png")
        page.screenshot(path=str(shot), full_page=True)
        context.close()

    assert errors == [] and outside == []
    assert overflow <= 0  # nothing wider than the window: no sideways scrolling
    assert len(cells) == len(doc["points"])
    by = {(c["batch"], c["context"]): c for c in cells}
    for p in doc["points"]:
        c = by[(p["batch"], p["context"])]
        assert c["w"] > 0  # laid out, visible
        if not p["feasible"]:  # does not fit in memory: marked, no gamma
            assert c["cls"] == "infeasible" and c["gamma"] == "" and "—" in c["text"]
            continue
        assert int(c["gamma"]) == p["gamma"]
        assert float(c["speedup"]) == pytest.approx(p["speedup"], rel=1e-9)
        assert ("off" in c["text"]) == (p["gamma"] == 0)
        if p["gamma"]:
            assert f"{p['speedup']:.2f}×" in c["text"]
    assert len(figures) == 3 and all(w > 100 for w in figures)
    assert shot.stat().st_size > 10_000
