"""The release of the serving engine a configuration is emitted for: ``emit
--engine-version``, defaulting to the engine profile's ``version``, decides whether a
feature the engine gained late (vLLM's per-batch-size draft lengths) may be emitted.
"""

from __future__ import annotations

import re

from spectune.core.deployment import Engine
from spectune.errors import InputError

_RELEASE = re.compile(r"v?(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?([.+\-]?[0-9A-Za-z.+\-]{0,40})")


def release(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a release such as ``0.24.0``, ``0.10``, ``v0.11.0rc1``;
    ValueError for anything else (a pre-release counts as its release)."""
    m = _RELEASE.fullmatch(text.strip())
    if m is None:
        raise ValueError(text)
    return int(m[1]), int(m[2] or 0), int(m[3] or 0)


def parse_engine_version(text: str) -> str:
    """``--engine-version`` checked: a release such as 0.24.0 (InputError, exit 2, else)."""
    try:
        release(text)
    except ValueError:
        raise InputError(f"--engine-version expects a release such as 0.24.0 or 0.10, got "
                         f"{text[:60]!r}") from None
    return text.strip()


def predates(engine: Engine, engine_name: str, first: str) -> str | None:
    """The profile engine's version when it is ``engine_name``'s (its family) and older than
    release ``first``; None when it is not, or the version is unknown or unreadable (then
    the current release is assumed)."""
    if engine.family != engine_name or not engine.version:
        return None
    try:
        return engine.version if release(engine.version) < release(first) else None
    except ValueError:
        return None
