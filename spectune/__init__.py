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

from importlib import import_module
from typing import TYPE_CHECKING, Any

from spectune.base.version import __version__

if TYPE_CHECKING:  # the real names, for type checkers; at run time they load on first use
    from spectune.api import (
        calibrate,
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
        rules,
        speedup,
        widthdepth,
    )
    from spectune.api.gate import CheckResult
    from spectune.api.pricing import PassCost
    from spectune.base.errors import InputError, ObserveError, SpectuneError
    from spectune.core.acceptance import Acceptance
    from spectune.core.deployment import Deployment, Workload
    from spectune.core.recommend import Recommendation
    from spectune.core.speedup import PointSpeedup
    from spectune.documents.envelope import API_VERSION
    from spectune.documents.observation import Observation
    from spectune.engines.emit import Snippet

__all__ = [
    "API_VERSION", "Acceptance", "CheckResult", "Deployment", "InputError", "Observation", "ObserveError",
    "PassCost", "PointSpeedup", "Recommendation", "Snippet", "SpectuneError", "Workload", "__version__",
    "calibrate", "check", "cost", "document", "emit", "list_profiles", "load_observation", "load_profile",
    "observe_log", "observe_url", "recommend", "rules", "speedup", "widthdepth",
]

FUNCTIONS = ("calibrate", "check", "cost", "document", "emit", "list_profiles", "load_observation",
             "load_profile", "observe_log", "observe_url", "recommend", "rules", "speedup", "widthdepth")
# No submodule of spectune or spectune.api is named like one of these names (or spectune.api's):
# the import system sets a loaded submodule as an attribute of its package, which would hide
# the function (tests/test_architecture.py holds the layout to this).
# name -> module that defines it
_WHERE = {
    **dict.fromkeys(FUNCTIONS, "spectune.api"),
    "Acceptance": "spectune.core.acceptance",
    "CheckResult": "spectune.api.gate",
    "Deployment": "spectune.core.deployment", "Workload": "spectune.core.deployment",
    "Snippet": "spectune.engines.emit",
    "API_VERSION": "spectune.documents.envelope",
    "InputError": "spectune.base.errors", "SpectuneError": "spectune.base.errors",
    "ObserveError": "spectune.base.errors",
    "Observation": "spectune.documents.observation",
    "PassCost": "spectune.api.pricing",
    "Recommendation": "spectune.core.recommend",
    "PointSpeedup": "spectune.core.speedup",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
