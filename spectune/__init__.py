"""spectune: tune speculative decoding's draft length from a roofline cost model.

The public API (documented in :mod:`spectune.api`; nothing is printed, results are typed)::

    import spectune
    dep = spectune.load_profile("llama-3.1-70b-h100-eagle3")
    rec = spectune.recommend(dep, alpha=0.7)
    snippet = spectune.emit(rec, "vllm").text

Names load on first use (PEP 562), so ``import spectune`` is cheap and never loads click,
NumPy or the HTTP client.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from spectune.version import __version__

if TYPE_CHECKING:  # the real names, for type checkers; at run time they load on first use
    from spectune.acceptance import Acceptance
    from spectune.api import (
        check,
        cost,
        document,
        emit,
        list_profiles,
        load_observation,
        load_profile,
        observe_log,
        observe_url,
        recommend,
        speedup,
    )
    from spectune.check import CheckResult
    from spectune.deployment import Deployment, Workload
    from spectune.emit import Snippet
    from spectune.envelope import API_VERSION
    from spectune.errors import InputError, SpectuneError
    from spectune.observe.faults import ObserveError
    from spectune.observe.observation import Observation
    from spectune.pricing import PassCost
    from spectune.recommend import Recommendation
    from spectune.speedup import PointSpeedup

__all__ = [
    "API_VERSION", "Acceptance", "CheckResult", "Deployment", "InputError", "Observation", "ObserveError",
    "PassCost", "PointSpeedup", "Recommendation", "Snippet", "SpectuneError", "Workload", "__version__",
    "check", "cost", "document", "emit", "list_profiles", "load_observation", "load_profile",
    "observe_log", "observe_url", "recommend", "speedup",
]

# The API functions; five share their name with a submodule (spectune/recommend.py, ...).
FUNCTIONS = ("check", "cost", "document", "emit", "list_profiles", "load_observation", "load_profile",
             "observe_log", "observe_url", "recommend", "speedup")
# name -> module that defines it
_WHERE = {
    **dict.fromkeys(FUNCTIONS, "spectune.api"),
    "Acceptance": "spectune.acceptance",
    "CheckResult": "spectune.check",
    "Deployment": "spectune.deployment", "Workload": "spectune.deployment",
    "Snippet": "spectune.emit",
    "API_VERSION": "spectune.envelope",
    "InputError": "spectune.errors", "SpectuneError": "spectune.errors",
    "ObserveError": "spectune.observe.faults",
    "Observation": "spectune.observe.observation",
    "PassCost": "spectune.pricing",
    "Recommendation": "spectune.recommend",
    "PointSpeedup": "spectune.speedup",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Package(ModuleType):
    """The import system sets each loaded submodule as an attribute of its package; for the
    API functions named like a submodule (``spectune.recommend`` and spectune/recommend.py)
    the function must stay, so that attribute is not set. Code reaches those submodules by
    ``from spectune.recommend import ...`` (never ``import spectune.recommend``; the
    architecture test checks it)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FUNCTIONS and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
