"""SGLang, one package by job: :mod:`~spectune.engines.sglang.defaults` (its name and the defaults
spectune relies on), :mod:`~spectune.engines.sglang.settings` (``launch_server`` flags and the
adaptive config from a recommendation), :mod:`~spectune.engines.sglang.config` (reading them back
from a command line) and :mod:`~spectune.engines.sglang.metrics` (its ``/metrics`` gauges and a
captured window into an Observation).

This face carries the names of the :class:`~spectune.engines.registry.Engine` protocol (and the
few others callers use); the modules inside the package import one another by module path.
"""

from spectune.base.limits import (
    DEFAULT_ADAPTIVE_CONFIG,  # spectune's own default; the CLI reads it without the engines
)
from spectune.engines.sglang.config import (
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
from spectune.engines.sglang.defaults import LABEL, LAUNCH, METRICS_PATH, NAME, OWNED_BY, VERSION_PATH
from spectune.engines.sglang.metrics import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    JSON_METRICS,
    PREFIX,
    RESET_COUNTER,
    SPEC_METRIC,
    SPECULATION_NAMED,
    SPECULATION_SERIES,
    analyse,
    analyse_window,
    check_metrics,
    open_window,
    recording_rules,
)
from spectune.engines.sglang.settings import METHODS, SNIPPET_KINDS, launch_command, reference, snippet

__all__ = [
    "CONFIG_FORM",
    "COUNTERS",
    "DEFAULT_ADAPTIVE_CONFIG",
    "GAUGES",
    "HISTOGRAMS",
    "JSON_METRICS",
    "LABEL",
    "LAUNCH",
    "LAUNCHES",
    "METHODS",
    "METRICS_PATH",
    "NAME",
    "OWNED_BY",
    "PREFIX",
    "RESET_COUNTER",
    "SNIPPET_KINDS",
    "SPECULATION_NAMED",
    "SPECULATION_SERIES",
    "SPEC_METRIC",
    "VERSION_PATH",
    "analyse",
    "analyse_window",
    "check_metrics",
    "claims_config_file",
    "launch_args",
    "launch_command",
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
