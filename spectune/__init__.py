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

import os
import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from spectune.version import __version__

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
    from spectune.core.acceptance import Acceptance
    from spectune.core.deployment import Deployment, Workload
    from spectune.core.recommend import Recommendation
    from spectune.core.speedup import PointSpeedup
    from spectune.documents.envelope import API_VERSION
    from spectune.documents.observation import Observation
    from spectune.engines.emit import Snippet
    from spectune.errors import InputError, ObserveError, SpectuneError
    from spectune.gate import CheckResult
    from spectune.pricing import PassCost

__all__ = [
    "API_VERSION", "Acceptance", "CheckResult", "Deployment", "InputError", "Observation", "ObserveError",
    "PassCost", "PointSpeedup", "Recommendation", "Snippet", "SpectuneError", "Workload", "__version__",
    "calibrate", "check", "cost", "document", "emit", "list_profiles", "load_observation", "load_profile",
    "observe_log", "observe_url", "recommend", "rules", "speedup", "widthdepth",
]

FUNCTIONS = ("calibrate", "check", "cost", "document", "emit", "list_profiles", "load_observation",
             "load_profile", "observe_log", "observe_url", "recommend", "rules", "speedup", "widthdepth")
# API functions that share their name with a submodule of spectune itself (none since the role
# packages: spectune/recommend.py is spectune/core/recommend.py). Kept general: one added later
# (say spectune/fleet.py beside an API ``fleet``) must stay the function after the import.
# (os.path, not pathlib: `spectune --help` must cost click alone, and pathlib is 5 ms more.)
_HERE = os.path.dirname(os.path.abspath(__file__))
NAMESAKES = tuple(n for n in FUNCTIONS if os.path.isfile(os.path.join(_HERE, f"{n}.py"))
                  or os.path.isdir(os.path.join(_HERE, n)))
# name -> module that defines it
_WHERE = {
    **dict.fromkeys(FUNCTIONS, "spectune.api"),
    "Acceptance": "spectune.core.acceptance",
    "CheckResult": "spectune.gate",
    "Deployment": "spectune.core.deployment", "Workload": "spectune.core.deployment",
    "Snippet": "spectune.engines.emit",
    "API_VERSION": "spectune.documents.envelope",
    "InputError": "spectune.errors", "SpectuneError": "spectune.errors",
    "ObserveError": "spectune.errors",
    "Observation": "spectune.documents.observation",
    "PassCost": "spectune.pricing",
    "Recommendation": "spectune.core.recommend",
    "PointSpeedup": "spectune.core.speedup",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        if name in NAMESAKES:
            value = _Namesake(value, f"spectune.{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Namesake:
    """An API function named like a submodule (``spectune.fleet`` and spectune/fleet.py).

    Calling it runs the API function; every attribute is the submodule's (read, set and
    deleted there), so code that reaches the submodule as ``spectune.fleet`` --
    ``import spectune.fleet as m``, ``monkeypatch.setattr(spectune.fleet, "x", ...)``,
    ``mock.patch("spectune.fleet.x")`` -- keeps working."""

    __slots__ = ("__wrapped__", "_module")
    __doc__ = property(lambda self: self.__wrapped__.__doc__)

    def __init__(self, fn: Any, module: str) -> None:
        object.__setattr__(self, "__wrapped__", fn)  # inspect.signature follows it
        object.__setattr__(self, "_module", module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(import_module(self._module), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(import_module(self._module), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(import_module(self._module), name)

    def __dir__(self) -> list[str]:
        return dir(import_module(self._module))

    def __repr__(self) -> str:
        return f"<spectune API function {self.__wrapped__.__name__} (attributes: module {self._module})>"


class _Package(ModuleType):
    """The import system sets each loaded submodule as an attribute of its package; for the
    namesakes the API entry (:class:`_Namesake`) must stay, so that attribute is not set."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in NAMESAKES and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
