"""The release of the serving engine a configuration is emitted for: ``emit
--engine-version``, defaulting to the engine profile's ``version``, decides whether a
feature the engine gained late (vLLM's per-batch-size draft lengths) may be emitted.
"""

from __future__ import annotations

import re

from spectune.base.errors import InputError
from spectune.core.deployment import Engine

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


def overlap_note(engine: Engine, kind: str, gpu_key: str = "") -> str | None:
    """Why a ``kind`` drafter's predicted speedup on ``engine`` is optimistic, or None: from
    release ``engine.overlap_since`` the engine overlaps each plain step's host work with the
    device's previous step but runs ``kind`` (one of ``engine.overlap_without``) without that
    overlap, while spectune charges both arms the same host terms. An engine version older
    than ``overlap_since``, or a GPU profile ``gpu_key`` in ``engine.overlap_not_on``, runs
    both arms without it (None); an unknown or unreadable version is taken as the current
    release."""
    if (kind not in engine.overlap_without or not engine.overlap_since
            or gpu_key in engine.overlap_not_on):
        return None
    try:
        if engine.version and release(engine.version) < release(engine.overlap_since):
            return None
    except ValueError:
        pass
    at = f" {engine.version}" if engine.version else ""
    return (f"engine {engine.name}{at}: plain decoding overlaps each step's host work (scheduling, "
            f"input preparation, output processing) with the device's previous step (async "
            f"scheduling, on by default since {engine.overlap_since}), but {kind} speculation runs "
            f"without it; spectune charges both the same host overhead, so the predicted {kind} "
            f"speedup is optimistic, most at small batch where host time is a large share of a step "
            f"(not priced: no measurement isolates it; the engine profile's overlap_scheduling)")
