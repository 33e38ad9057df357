"""``../shared``, the reference data beside the checkout (the captured vLLM scrape and log
the copies under tests/fixtures/ were taken from, the seeds, the layout sketch).

A test that reads it says so by taking the ``shared_dir`` fixture (conftest.py), which also
marks it ``shared`` (``-m "not shared"`` leaves them out). Without the folder such a test
skips with that reason on a developer's machine, but fails under CI (``$CI`` set, as
``.ci/run`` and most CI services do): CI runs beside ``../shared``, so a skip there would hide
that the comparison did not run."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

#: ../shared beside the repository's folder (tests/ -> checkout -> its parent)
SHARED = Path(__file__).resolve().parents[2] / "shared"


def under_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """``$CI`` set to anything but empty, 0, false or no (CI services set ``CI=true``)."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need_shared(root: Path = SHARED, environ: Mapping[str, str] = os.environ) -> Path:
    """``root`` when it is a folder; else skip, or under CI fail, saying what is missing."""
    if root.is_dir():
        return root
    reason = f"needs ../shared (the reference data) beside the checkout: {root} is absent"
    if under_ci(environ):
        pytest.fail(f"{reason}; CI is set, and CI must not skip what it is there to run", pytrace=False)
    pytest.skip(reason)
