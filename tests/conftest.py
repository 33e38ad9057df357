"""Shared fixtures: the seed's B200 (peak figures, no derating) and DeepSeek-V4-Flash
constants as seed 000's appendix states them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_data import need_shared

from spectune.core.hardware import GPU


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "shared: reads ../shared beside the checkout (the shared_dir "
                                       "fixture): skipped without it, failed without it under $CI")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes ``shared_dir`` says so by its marker too."""
    for item in items:
        if "shared_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared)


@pytest.fixture
def shared_dir() -> Path:
    """``../shared``: skips without it, fails without it under CI (tests/shared_data.py)."""
    return need_shared()


@pytest.fixture
def seed_b200() -> GPU:
    """B200 as seed 000 uses it: 8 TB/s, 2.25 / 4.5 / 9 PFLOP/s dense bf16 / fp8 / fp4."""
    return GPU(key="b200-seed", name="B200 (seed 000)", memory_bytes=180e9, hbm_bandwidth=8e12,
               peak_flops={"bf16": 2.25e15, "fp8": 4.5e15, "fp4": 9e15},
               link_bandwidth=900e9, link_latency=0.0)


@pytest.fixture(autouse=True)
def _no_remembered_secrets() -> Iterator[None]:
    """spectune.base.redact remembers the credentials a process was given (one command per
    process in real use): each test starts and ends without any."""
    from spectune.base import redact

    redact.forget()
    yield
    redact.forget()
