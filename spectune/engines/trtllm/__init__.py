"""TensorRT-LLM (``trtllm-serve``, PyTorch backend), one package by job:
:mod:`~spectune.engines.trtllm.releases` (its name, where it tells its version, the releases each
emitted form needs), :mod:`~spectune.engines.trtllm.settings` (the ``speculative_config`` of an
``--extra_llm_api_options`` / ``--config`` YAML file from a recommendation),
:mod:`~spectune.engines.trtllm.config` (reading it back from that file, a command line or a
manifest), :mod:`~spectune.engines.trtllm.metrics` (its ``/prometheus/metrics`` counters and a
captured window into an Observation) and :mod:`~spectune.engines.trtllm.iterstats` (the JSON
iteration statistics of its ``/metrics``, the source before those counters).

This face carries the names of the :class:`~spectune.engines.registry.Engine` protocol (and the
few others callers use); the modules inside the package import one another by module path.
"""

from spectune.engines.trtllm.config import (
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
from spectune.engines.trtllm.iterstats import reader_for as JSON_METRICS
from spectune.engines.trtllm.metrics import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    PREFIX,
    RESET_COUNTER,
    SPEC_METRIC,
    SPECULATION_NAMED,
    SPECULATION_SERIES,
    analyse_window,
    check_metrics,
    open_window,
    recording_rules,
)
from spectune.engines.trtllm.releases import LABEL, METRICS_PATH, NAME, OWNED_BY, VERSION_PATH
from spectune.engines.trtllm.settings import METHODS, SNIPPET_KINDS, launch_command, reference, snippet

__all__ = [
    "CONFIG_FORM", "COUNTERS", "GAUGES", "HISTOGRAMS", "JSON_METRICS", "LABEL", "LAUNCHES", "METHODS",
    "METRICS_PATH", "NAME", "OWNED_BY", "PREFIX", "RESET_COUNTER", "SNIPPET_KINDS", "SPECULATION_NAMED",
    "SPECULATION_SERIES", "SPEC_METRIC", "VERSION_PATH", "analyse_window", "check_metrics",
    "claims_config_file", "launch_args", "launch_command", "open_window", "priced_exchange",
    "profile_warnings", "read_args", "read_config_file", "recording_rules", "reference", "runs_image",
    "same_method", "snippet",
]
