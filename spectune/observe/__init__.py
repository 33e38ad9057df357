"""``spectune observe``: measure speculative-decoding acceptance and the operating point of a
running vLLM or SGLang server from its Prometheus ``/metrics`` (or from vLLM's log lines).

Public API (what ``spectune recommend --observed/--metrics-url`` uses):

* :func:`observe_url` — scrape ``/metrics`` at the start and end of a window (and every
  ``interval`` seconds between) and return an :class:`Observation`;
* :func:`observe_log` — the same document from vLLM's ``SpecDecoding metrics`` log lines;
* :func:`load_observation` — read an ``observe -o yaml|json`` file back;
* :func:`observation_acceptance` — the measured :class:`~spectune.core.acceptance.Acceptance`;
* :func:`observation_operating_point` — batch sizes seen (with weights) and a context estimate.

Faults raise :class:`~spectune.base.errors.ObserveError` subclasses, each with its own
exit code (table in :mod:`spectune.base.errors`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names, for type checkers; at run time they load on first use
    from spectune.base.errors import EXIT_CODES, ObserveError
    from spectune.documents.observation import Observation, load_observation
    from spectune.observe.api import (
        DEFAULT_TOKEN_ENV,
        detect_engine,
        observation_acceptance,
        observation_operating_point,
        observe_url,
    )
    from spectune.observe.log import observe_log

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "EXIT_CODES",
    "Observation",
    "ObserveError",
    "detect_engine",
    "load_observation",
    "observation_acceptance",
    "observation_operating_point",
    "observe_log",
    "observe_url",
]

# Loaded lazily so that `spectune --help` does not pay for NumPy, requests and the parser.
_WHERE = {
    "DEFAULT_TOKEN_ENV": "spectune.observe.api", "detect_engine": "spectune.observe.api",
    "observation_acceptance": "spectune.observe.api",
    "observation_operating_point": "spectune.observe.api", "observe_url": "spectune.observe.api",
    "EXIT_CODES": "spectune.base.errors", "ObserveError": "spectune.base.errors",
    "observe_log": "spectune.observe.log",
    "Observation": "spectune.documents.observation", "load_observation": "spectune.documents.observation",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectune.observe' has no attribute {name!r}")
