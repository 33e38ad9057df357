"""The serving engines spectune knows, one package each under ``spectune/engines/``: everything
about an engine sits in its package -- its metric names and how to read them, its speculative
settings and how to emit them, how to read them back from a config file, command line or
manifest, its log format, defaults, releases and limits.

The gate (:mod:`spectune.api.gate`), the serving-config reader (:mod:`spectune.engines.serving_config`),
``spectune emit`` and ``spectune observe`` (a URL or Prometheus) reach an engine through :data:`ENGINES` and
the names of :class:`Engine`; an engine profile says which engine it prices by its ``family``
(one of these names). :data:`ENGINES` is every subpackage of ``spectune/engines/``
(:func:`spectune.documents.families.engine_families`), so adding an engine (TensorRT-LLM, say)
is adding one package whose face has those names; its ``/metrics`` is told from the others' by
its ``PREFIX`` and ``SPEC_METRIC`` (:func:`spectune.observe.api.detect_engine`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, cast

from spectune.base.errors import InputError
from spectune.core.deployment import Deployment
from spectune.core.deployment import Engine as EngineCosts
from spectune.core.plan import Plan
from spectune.core.recommend import Recommendation
from spectune.documents.exposition import Exposition
from spectune.documents.families import DEFAULT_ENGINE, engine_families
from spectune.documents.observation import Observation
from spectune.documents.window import Capture
from spectune.engines.options import Configured


class MetricsReader(Protocol):
    """Reads the answers of a ``/metrics`` that is not a Prometheus exposition (TensorRT-LLM's
    JSON iteration statistics before its counters): called with each body and its content type
    in the order they came, it gives an :class:`Exposition` (running sums); ``matched`` turns True
    once a body was of its kind, so that its faults, not the exposition parser's, are the ones to show."""

    matched: bool

    def __call__(self, text: str, content_type: str | None = None) -> Exposition: ...


class Engine(Protocol):
    """What spectune asks of an engine module."""

    NAME: str  # as in profiles and documents: "vllm"
    LABEL: str  # as in messages: "vLLM"
    METHODS: dict[str, str]  # spectune drafter kind -> the engine's method for it
    SNIPPET_KINDS: dict[str, str]  # what `spectune emit PROFILE KIND` writes for it: kind -> what it is
    VERSION_PATH: str  # HTTP path of the server whose JSON carries its "version"
    METRICS_PATH: str  # HTTP path of its Prometheus exposition ("/metrics")
    OWNED_BY: str  # the "owned_by" of the models its /v1/models lists ("vllm")
    CONFIG_FORM: str | None  # the form of its own YAML config file ("vllm-config-file"; None: it has none)
    LAUNCHES: tuple[str, ...]  # the command lines that launch it (for messages: "vllm serve")
    PREFIX: str  # what its /metrics names start with: "vllm:"
    SPEC_METRIC: str  # a metric its /metrics shows only while it speculates
    COUNTERS: tuple[str, ...]  # the metrics its readers take, by type (Prometheus queries by type)
    HISTOGRAMS: tuple[str, ...]
    GAUGES: tuple[str, ...]
    RESET_COUNTER: str | None  # a counter whose resets() count restarts (None: none)
    SPECULATION_SERIES: tuple[str, ...]  # any of them seen in a window: the server speculates
    SPECULATION_NAMED: str  # those series as messages name them: "vllm:spec_decode_*"
    # a reader of its /metrics when that answers JSON instead of an exposition, given the server's
    # version (None: unknown); None from it, or no factory at all: the exposition is the source
    JSON_METRICS: Callable[[str | None], MetricsReader | None] | None

    # ---- settings emitted (spectune emit, recommend --emit) and the gate's reference
    def snippet(self, rec: Recommendation, kind: str, plan: Plan,
                adaptive_path: str | None = None) -> tuple[str, list[str] | None]: ...

    def reference(self, rec: Recommendation, plan: Plan,
                  form: str) -> tuple[Callable[[int], int], dict[str, Any], list[str]]: ...

    def launch_command(self, snippet_text: str) -> str: ...  # the launch line the HTML report shows

    # ---- settings read back (spectune.engines.serving_config) and compared with a profile (check)
    def claims_config_file(self, data: dict[str, Any]) -> bool: ...  # a YAML mapping is its config file

    def read_config_file(self, conf: Configured, data: dict[str, Any], node: Any) -> None: ...

    def launch_args(self, words: list[str], i: int) -> list[str] | None: ...

    def runs_image(self, image: str) -> bool: ...

    def read_args(self, conf: Configured, args: list[str], folder: Path) -> None: ...

    def same_method(self, configured: str, expected: str) -> bool: ...

    def profile_warnings(self, conf: Configured, dep: Deployment) -> list[str]: ...

    # the expert-parallel exchange the configuration runs for ``dep`` and how it was set
    def priced_exchange(self, conf: Configured, dep: Deployment) -> tuple[str | None, str]: ...

    # ---- metrics (spectune observe URL, observe --prometheus)
    def open_window(self, expo: Exposition, model_name: str | None) -> tuple[str | None, Any]: ...

    def analyse_window(self, capture: Capture, model: str | None, opened: Any = None,
                       num_speculative_tokens: int | None = None) -> Observation: ...

    # ---- Prometheus recording rules (spectune rules): metric -> PromQL over a window
    def recording_rules(self, window: str, matchers: str, by: str, per_instance: str) -> dict[str, str]: ...


# Every engine package, by NAME (the only list of engines: the packages themselves).
ENGINES: dict[str, Engine] = {name: cast(Engine, import_module(f"spectune.engines.{name}"))
                              for name in engine_families()}


def engine_for(name: str) -> Engine:
    """The engine module called ``name`` (InputError naming the known ones otherwise)."""
    if name not in ENGINES:
        raise InputError(f"unknown serving engine {name!r}; spectune knows {', '.join(ENGINES)}")
    return ENGINES[name]


def engine_pricing(costs: EngineCosts) -> Engine:
    """The engine whose overheads ``costs`` (a profile's engine) are: its ``family``, as the
    profile names it (never guessed from its name); the default engine for costs of no engine
    (``--engine none``, the pure roofline)."""
    return engine_for(costs.family or DEFAULT_ENGINE)


def engine_of_snippet(kind: str) -> Engine:
    """The engine that writes snippet ``kind`` (``vllm-yaml`` -> vLLM)."""
    for engine in ENGINES.values():
        if kind in engine.SNIPPET_KINDS:
            return engine
    kinds = [k for e in ENGINES.values() for k in e.SNIPPET_KINDS]
    raise InputError(f"unknown snippet kind {kind!r}; expected one of {', '.join(kinds)}")


__all__ = ["ENGINES", "Configured", "Engine", "MetricsReader", "engine_for", "engine_of_snippet",
           "engine_pricing"]
