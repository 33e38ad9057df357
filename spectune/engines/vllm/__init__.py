"""vLLM, one package by job: :mod:`~spectune.engines.vllm.releases` (its name and the releases
each emitted field needs), :mod:`~spectune.engines.vllm.settings` (speculative settings from a
recommendation, emitted as JSON, YAML or Python), :mod:`~spectune.engines.vllm.config` (reading
them back from a config file or command line), :mod:`~spectune.engines.vllm.metrics` (its
``/metrics`` names and how they are read into counts), :mod:`~spectune.engines.vllm.observation`
(a captured window into an Observation) and :mod:`~spectune.engines.vllm.log` (its
``SpecDecoding metrics`` log lines).

This face carries the names of the :class:`~spectune.engines.registry.Engine` protocol (and the
few others callers use); the modules inside the package import one another by module path.
"""

from spectune.engines.vllm.config import (
    CONFIG_FORM,
    LAUNCHES,
    claims_config_file,
    launch_args,
    priced_exchange,
    profile_warnings,
    read_args,
    read_config_file,
    runs_image,
    same_method,
)
from spectune.engines.vllm.metrics import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    JSON_METRICS,
    PREFIX,
    RESET_COUNTER,
    SPEC_METRIC,
    SPECULATION_NAMED,
    SPECULATION_SERIES,
    flavour,
    model_names,
    recording_rules,
)
from spectune.engines.vllm.observation import analyse, analyse_window, open_window
from spectune.engines.vllm.releases import (
    LABEL,
    METRICS_PATH,
    NAME,
    OWNED_BY,
    SCHEDULE_MIN_VLLM,
    VERIFIED_VLLM,
    VERSION_PATH,
)
from spectune.engines.vllm.settings import (
    LAUNCH_WITH_CONFIG,
    METHODS,
    SNIPPET_KINDS,
    launch_command,
    reference,
    snippet,
)

__all__ = [
    "CONFIG_FORM",
    "COUNTERS",
    "GAUGES",
    "HISTOGRAMS",
    "JSON_METRICS",
    "LABEL",
    "LAUNCHES",
    "LAUNCH_WITH_CONFIG",
    "METHODS",
    "METRICS_PATH",
    "NAME",
    "OWNED_BY",
    "PREFIX",
    "RESET_COUNTER",
    "SCHEDULE_MIN_VLLM",
    "SNIPPET_KINDS",
    "SPECULATION_NAMED",
    "SPECULATION_SERIES",
    "SPEC_METRIC",
    "VERIFIED_VLLM",
    "VERSION_PATH",
    "analyse",
    "analyse_window",
    "claims_config_file",
    "flavour",
    "launch_args",
    "launch_command",
    "model_names",
    "open_window",
    "priced_exchange",
    "profile_warnings",
    "read_args",
    "read_config_file",
    "recording_rules",
    "reference",
    "runs_image",
    "same_method",
    "snippet",
]
