"""Small builders shared by tests: an inline deployment profile around a real config.json."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"

GPU = {"name": "Test GPU", "memory_gb": 80, "hbm_bandwidth_tbps": 3.35,
       "peak_tflops": {"bf16": 989, "fp8": 1979}, "link_bandwidth_gbps": 450, "link_latency_us": 10}
ENGINE = {"name": "vllm", "family": "vllm", "pass_overhead_us": 300, "layer_overhead_us": 5,
          "draft_pass_overhead_us": 150, "verify_token_cost_us": 1}


def profile(**over: object) -> dict:
    """A valid deployment profile (Llama-3.1-8B, an H100-like GPU, vLLM-like engine)."""
    cfg = json.loads((DATA / "Llama-3.1-8B.json").read_text())
    base = {"name": "t", "gpu": GPU, "model": {"name": "Llama-3.1-8B", "hf_config": cfg},
            "drafter": {"kind": "ngram"}, "engine": ENGINE,
            "workload": {"batch_sizes": [1, 8], "context_lengths": [1024]},
            "acceptance": {"alpha": 0.7}}
    base.update(over)
    return base


