"""Tests that need ../shared say so, and CI fails rather than skips them (tests/shared_data.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import SHARED, need_shared, under_ci

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("value", ["true", "1", "yes", "True"])
def test_without_shared_ci_fails(tmp_path: Path, value: str) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"needs \.\./shared .*CI is set"):
        need_shared(tmp_path / "shared", {"CI": value})


@pytest.mark.parametrize("environ", [{}, {"CI": ""}, {"CI": "false"}, {"CI": "0"}])
def test_without_shared_a_developer_skips_with_the_reason(tmp_path: Path, environ: dict[str, str]) -> None:
    assert not under_ci(environ)
    with pytest.raises(pytest.skip.Exception, match=r"needs \.\./shared .* is absent"):
        need_shared(tmp_path / "shared", environ)


def test_with_shared_the_folder_is_given(tmp_path: Path) -> None:
    assert need_shared(tmp_path, {"CI": "true"}) == tmp_path
    assert SHARED.name == "shared" and SHARED.parent == TESTS.parent.parent  # beside the checkout


def test_the_tests_that_read_shared_are_marked() -> None:
    """Whoever takes the shared_dir fixture carries the `shared` marker: `-m shared` selects
    the comparisons of tests/fixtures/ with their originals."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "shared", str(TESTS / "test_observe_fixtures.py")],
                         capture_output=True, text=True, check=False, cwd=TESTS.parent)
    picked = [line for line in out.stdout.splitlines() if "::" in line]
    assert len(picked) == 2 and all("test_copies_equal_shared_fixtures" in t for t in picked), out.stdout


def test_no_test_looks_for_shared_on_its_own() -> None:
    """Every test reaches ../shared through the shared_dir fixture, none builds the path itself
    (a hand-made path is how a silent skip came about)."""
    own = {TESTS / "shared_data.py", Path(__file__).resolve()}
    path = re.compile(r"""["'](\.\./shared|shared["'])""")  # "shared" or "../shared..."
    bad = [f.name for f in sorted(TESTS.rglob("*.py")) if f not in own and path.search(f.read_text("utf-8"))]
    assert not bad, bad
    assert path.search('ROOT / ".." / "shared" / "reference"') and path.search("'../shared/x'")
