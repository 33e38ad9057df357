"""vLLM's name, where it tells its version, and the releases each emitted field needs.
"""

from __future__ import annotations

from typing import Any

NAME = "vllm"
LABEL = "vLLM"

VERSION_PATH = "/version"  # HTTP path whose JSON has the server's "version"
METRICS_PATH = "/metrics"  # HTTP path of its Prometheus exposition
OWNED_BY = "vllm"  # /v1/models "owned_by" (vllm/entrypoints/openai/protocol.py ModelCard)

# The oldest vLLM release that accepts each emitted field (README, "Engine settings").
SCHEDULE_MIN_VLLM = "0.24.0"  # num_speculative_tokens_per_batch_size: vllm-project/vllm#32374
# ("Dynamic SD"), documented from vLLM 0.24.0 (docs/features/speculative_decoding/
# dynamic_speculative_decoding.md); older releases reject the unknown key.
MTP_MIN_VLLM = "0.11.0"  # method "mtp": vllm-project/vllm#25232 merged deepseek_mtp etc. into it
CONFIG_MIN_VLLM = "0.9.0"  # --speculative-config JSON (vllm-project/vllm#14434, March 2025) with
# method ngram / eagle / eagle3 (EAGLE-3: vllm-project/vllm#16937, April 2025)
VERIFIED_VLLM = "0.32.0"  # every emitted form is checked against it (tests/test_emit_vllm.py);
# for method draft_model on the V1 engine spectune knows no older release to vouch for


def min_vllm(cfg: dict[str, Any] | None) -> str | None:
    """The oldest vLLM that accepts ``cfg``, in words (None for speculation off)."""
    if cfg is None:
        return None
    needs = [(CONFIG_MIN_VLLM, "--speculative-config")]
    if cfg.get("method") == "draft_model":
        needs.append((VERIFIED_VLLM, "method 'draft_model'; the release spectune verified"))
    if cfg.get("method") == "mtp":
        needs.append((MTP_MIN_VLLM, "method 'mtp'"))
    if "num_speculative_tokens_per_batch_size" in cfg:
        needs.append((SCHEDULE_MIN_VLLM, "num_speculative_tokens_per_batch_size"))
    need, why = max(needs, key=lambda n: tuple(int(x) for x in n[0].split(".")))
    return f"needs vLLM >= {need} ({why})"
