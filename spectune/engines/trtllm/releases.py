"""TensorRT-LLM's name, where it tells its version, and the releases each emitted form needs.

Sources (NVIDIA/TensorRT-LLM; read as stored text, the wheel cannot be imported without CUDA):

* ``tensorrt_llm/llmapi/llm_args.py`` at two points, extracted into
  ``tests/fixtures/trtllm/llm_args-*.json`` by ``scripts/trtllm_args.py``: the 1.2 line (stored
  version, index id 7019226376: ``draft_len_schedule`` with "batch_size >= 1 uses ..." lower-bound
  keys, key 1 required, ``MTPDecodingConfig.num_nextn_predict_layers: PositiveInt = 1`` which the
  validator copies into ``max_draft_len``) and main at commit 0004396720054fd8e205cbf616f21f0b57c6b412
  (the 1.4.0rc line: upper-bound keys, "Batch sizes 33+: use draft_len=0 (implicit, speculation
  disabled)", the smallest key must map to ``max_draft_len``; ``num_nextn_predict_layers`` is
  ``init=False``, remapped onto ``max_draft_len`` with a deprecation warning).
* ``draft_len_schedule`` came in 1.2 (NVIDIA/TensorRT-LLM#8194, "stage 1": NGram and two-model
  drafters only, and "target model still processes padded tokens" -- the docstring of
  ``tests/unittest/_torch/speculative/test_draft_len_schedule.py``); the one-model path and the
  upper-bound keys came with #10860 (merged 2026-03-13, the 1.3.0rc line), MTP / draft-target with
  #12262 (2026-03-17).
* ``trtllm-serve --config`` is an alias of ``--extra_llm_api_options`` from 1.2 on
  (NVIDIA/TensorRT-LLM#9104; ``tensorrt_llm/commands/serve.py`` @ 00209af149e7774406881a37283dce303571eb11).
* Prometheus speculative-decoding counters at ``/prometheus/metrics`` from the 1.3.0rc line
  (#12545 totals, #12636 per position; ``tensorrt_llm/metrics/collector.py`` @
  050f80def8df236e326949c8bd9dee10fd896a83); none in any 1.2.x or older release.
"""

from __future__ import annotations

from spectune.core.deployment import Engine
from spectune.engines.engine_version import release

NAME = "trtllm"
LABEL = "TensorRT-LLM"

VERSION_PATH = "/version"  # trtllm-serve's OpenAI server answers GET /version with {"version": ...}
METRICS_PATH = "/prometheus/metrics"  # not /metrics: that one serves the JSON iteration stats
OWNED_BY = "tensorrt_llm"  # /v1/models "owned_by" (tensorrt_llm/serve/openai_protocol.py ModelCard); its
# GET /version answers like vLLM's, so this tells them apart

SCHEDULE_MIN = "1.2.0"  # draft_len_schedule exists (lower-bound keys, drafter-side only)
ONE_MODEL_SCHEDULE_MIN = "1.3.0"  # upper-bound keys, verification shortened too (#10860, #12262)
# (#10860 merged 2026-03-13: which 1.3.0rc first carries it is not known here, and every 1.3.0rc
# counts as 1.3.0 -- an early rc may still read keys as lower bounds)
CONFIG_FLAG_MIN = "1.2.0"  # `--config` alias of `--extra_llm_api_options` (#9104)
METRICS_MIN = "1.3.0"  # trtllm_spec_decode_* Prometheus counters (#12545, #12636)
# decoding_type "Draft_Target": the Literal of DraftTargetDecodingConfig in the discriminated union
# of 1.2 (llm_args.py index id 7019226376) and main (@ 0004396720054fd8e205cbf616f21f0b57c6b412).
# Before it, DecodingBaseConfig.from_dict dispatched on a table whose key is "DraftTarget" (1.0:
# index id 1520735490, 1.1: index id 1090804222), and "Draft_Target" is "Invalid decoding type".
DRAFT_TARGET_LITERAL_MIN = "1.2.0"
#: The two lines every emitted form is validated against (tests/fixtures/trtllm/).
VALIDATED = ("1.2", "1.4.0rc")


def target_version(engine: Engine) -> str | None:
    """The TensorRT-LLM release a configuration is emitted for: the profile engine's
    ``version`` (``--engine-version`` overrides it) when the engine is TensorRT-LLM's, else
    None (unknown: the current line is assumed and a note says so)."""
    if engine.family != NAME or not engine.version:
        return None
    try:
        release(engine.version)
    except ValueError:
        return None
    return engine.version


def upper_bound_keys(version: str | None) -> bool:
    """True when ``version`` reads ``draft_len_schedule`` keys as upper bounds (1.3.0rc and
    later, or unknown: the current line); False on 1.2.x (lower bounds)."""
    return version is None or release(version) >= release(ONE_MODEL_SCHEDULE_MIN)


def before(version: str | None, first: str) -> bool:
    """``version`` is known and older than release ``first`` (a pre-release counts as its release)."""
    return version is not None and release(version) < release(first)
