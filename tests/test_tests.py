"""Every test module's name says what it guards: test_X.py, read word by word from the left,
names a module or package under spectune/, a script, a page under docs/, a test helper or
folder (test_observe_faults.py -> spectune/observe/, test_rules_promtool.py -> rules). A test
of a theme that spans the code says which path it guards in TOPICS below. A newcomer who opens
tests/ finds the code a test is about, and a test named after nothing fails here."""

from __future__ import annotations

from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Test modules named after a theme, not a module: the path each guards.
TOPICS = {
    "architecture": "spectune",  # the import graph of the whole package (floors, cycles)
    "builtin_profiles": "profiles",  # the shipped profiles load, cite their sources, run
    "draft_logits": "spectune/core/cost/drafter.py",  # a drafter pass scores one position
    "drafters": "spectune/engines",  # drafters as the engines' configs and check see them
    "ep_exchange": "spectune/core/cost/comm.py",  # the expert-parallel exchange an engine runs
    "hardening": "spectune/base/exit_codes.py",  # deadlines, size caps, exit codes a CI job can trust
    "integration": "spectune/cli",  # where two features meet, through the command line
    "labels": "spectune/core/acceptance.py",  # measured / stated / assumed, and marginal gains
    "newcomer": "README.md",  # what a new user following the README trips over
    "no_internal_errors": "spectune/base/exit_codes.py",  # no exit 70 a user can cause
    "profile_schema": "spectune/documents",  # the profile's JSON Schema and loader agree
    "properties": "spectune/cli",  # property-based: any input, exit 0 or 2 and sane speedups
    "secrets": "spectune/base/redact.py",  # no credential reaches the terminal
    "seed_000": "spectune/core/cost",  # seed 000's arithmetic from the cost functions
    "shared_prefix": "spectune/core/memory.py",  # a shared system prompt held once in KV
    "tests": "tests",  # this file: the names of the tests
    "wheel": "pyproject.toml",  # the package as pip installs it
}


@cache
def names() -> frozenset[str]:
    """Module and package names under spectune/, scripts, docs pages, test helpers and
    folders (tests/hostile/: the hostile inputs)."""
    out: set[str] = set()
    for path in (ROOT / "spectune").rglob("*.py"):
        out.add(path.stem)
        out.update(p.name for p in path.relative_to(ROOT / "spectune").parents if p.name)
    out.update(p.stem for p in (ROOT / "scripts").glob("*.*"))
    out.update(p.stem for p in (ROOT / "docs").glob("*.md"))
    out.update(p.stem for p in TESTS.glob("*.py") if not p.stem.startswith(("test_", "conftest")))
    out.update(p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    out.discard("__init__")
    return frozenset(out)


def subject(test: str) -> str | None:
    """The longest run of leading words of ``test`` (test_ dropped) that names something."""
    words = test.removeprefix("test_").split("_")
    return next(("_".join(words[:i]) for i in range(len(words), 0, -1) if "_".join(words[:i]) in names()),
                None)


def test_every_test_module_names_what_it_guards() -> None:
    unnamed = [p.name for p in sorted(TESTS.glob("test_*.py"))
               if subject(p.stem) is None and p.stem.removeprefix("test_") not in TOPICS]
    assert not unnamed, (f"{unnamed}: name the module after what it tests (a module, package, script "
                         "or docs page), or say in TOPICS which path it guards")


def test_topics_are_real() -> None:
    tests = {p.stem.removeprefix("test_") for p in TESTS.glob("test_*.py")}
    assert not set(TOPICS) - tests, f"TOPICS lists tests that are gone: {sorted(set(TOPICS) - tests)}"
    assert not [p for p in TOPICS.values() if not (ROOT / p).exists()], "a TOPICS path does not exist"


def test_the_subject_is_read_from_the_left() -> None:
    assert subject("test_observe_faults") == "observe" and subject("test_rules_promtool") == "rules"
    assert subject("test_hf_config_types") == "hf_config" and subject("test_cost") == "cost"
    assert subject("test_nothing_at_all") is None and subject("test_faults_observe") is None
