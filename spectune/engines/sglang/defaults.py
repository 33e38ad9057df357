"""SGLang's name, where it tells its version, and the defaults spectune relies on: its built-in
adaptive config, the running-request cap with speculation, the launch line. (The file spectune
writes the adaptive config to is spectune's own default, :data:`spectune.base.limits.DEFAULT_ADAPTIVE_CONFIG`:
the command line reads it without loading the engines.)
"""

from __future__ import annotations

NAME = "sglang"
LABEL = "SGLang"

VERSION_PATH = "/get_server_info"  # HTTP path whose JSON has the server's "version"
METRICS_PATH = "/metrics"  # HTTP path of its Prometheus exposition
OWNED_BY = "sglang"  # /v1/models "owned_by" (sglang/srt/entrypoints/openai/protocol.py ModelCard)

# SGLang's DEFAULT_ADAPTIVE_CONFIG (python/sglang/srt/speculative/adaptive_spec_params.py,
# sglang 0.5.23): used when --speculative-adaptive is given without a config file.
BUILTIN_ADAPTIVE_CANDIDATES = {"1": [1, 3, 5, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]}

SPEC_DEFAULT_MAX_RUNNING = 48  # running requests SGLang allows with speculation, unless told otherwise
# (python/sglang/srt/server_args.py ServerArgs: 48 from 0.4.5 on; 0.4.4.x set 32)
LAUNCH = "python -m sglang.launch_server --model-path MODEL"  # the launch line the HTML report shows
