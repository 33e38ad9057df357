#!/usr/bin/env python3
"""What SGLang 0.4.4.x's running-request cap and CUDA-graph buckets would do to the EAGLE-3
paper's Table 3 ladders (docs/published-speedups.yaml, [P1]; docs/validation.md, "EAGLE-1 batch
ladder"). A check of a hypothesis, not a fit: nothing here feeds a profile.

The paper names SGLang v0.4.4 but no launch flags. SGLang 0.4.4 - 0.4.4.post3 (the wheels on
PyPI), python/sglang/srt/server_args.py ``ServerArgs.__post_init__``: with EAGLE/EAGLE3,
``max_running_requests = 32`` unless given (48 only from 0.4.5); ``cuda_graph_max_bs`` 160 on
a GPU of 25 GB or more. python/sglang/srt/model_executor/cuda_graph_runner.py
``get_batch_sizes_to_capture``, speculative: 0.4.4 / post1 ``list(range(1, 33))`` with padding
disabled (a batch not captured runs eagerly); post2 / post3 ``list(range(1, 9)) +
list(range(9, 33, 2)) + [64, 96, 128, 160]`` plus the request pool's size (max running + 1),
padded up to the next captured size (``replay``: bisect on ``capture_bs``). The EAGLE3
algorithm is first accepted in post2 (``--speculative-algorithm`` choices).

Columns: measured; spectune's prediction; the cap of 32 binding in steady state (speculation at
min(B, 32) requests, the baseline at B); post2/post3 with the cap raised to 64 (GEMMs, the LM
head included, priced at the padded batch; attention and host-side costs at the real one, as
padded rows carry a sequence length of 1 and leave sampling). Then the EAGLE-1 / EAGLE-3 ratio,
in which every cost the two ladders share cancels.
"""

from __future__ import annotations

import bisect
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spectune.core.cost import step_cost  # noqa: E402
from spectune.core.deployment import Deployment  # noqa: E402
from spectune.core.speedup import speedup_grid  # noqa: E402
from spectune.documents.validation import deployment, predict  # noqa: E402

EAGLE3 = "EAGLE-3 paper Table 3 [P1]"
EAGLE1 = "EAGLE-3 paper Table 3 EAGLE-1 [P1]"
CAP = 32  # max_running_requests with speculation in 0.4.4.x (server_args.py)
# post2/post3 speculative capture sizes with --max-running-requests 64 (pool size 65)
PADDED = sorted({*range(1, 9), *range(9, 33, 2), 64, 65})
GEMMS = ("attn-proj", "dense-ffn", "lm-head")  # rows a padded graph really computes


def _pass(dep: Deployment, model_name: str, batch: int, padded: int, tokens: float, ctx: float,
          **kw: Any) -> float:
    """Seconds of one pass: GEMM components at ``padded`` rows, the rest at ``batch``."""
    model = dep.model if model_name == "target" else dep.drafter.model
    assert model is not None
    real, pad = (step_cost(model, dep.gpu, dep.parallelism, dep.engine, float(b), tokens, ctx,
                           **kw).components for b in (batch, padded))
    return float(sum((pad if k in GEMMS else real)[k].seconds for k in real))


def cycle(dep: Deployment, batch: int, padded: int, gamma: int, ctx: float) -> float:
    """One chain speculative cycle (verify of gamma + 1 tokens, gamma drafter passes)."""
    draft = {"speculative": False, "role": "draft", "drafter_kind": dep.drafter.kind}
    return (_pass(dep, "target", batch, padded, gamma + 1.0, ctx, speculative=True)
            + _pass(dep, "draft", batch, padded, gamma + 1.0, ctx, logit_positions=1.0, **draft)
            + (gamma - 1) * _pass(dep, "draft", batch, padded, 1.0, ctx, **draft))


def main() -> None:
    rows = yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text()) or []
    ladders = {src: {r["batch"]: r for r in rows if r["source"] == src} for src in (EAGLE3, EAGLE1)}
    for src, ladder in ladders.items():
        print(f"== {src}\n  B  meas  pred  cap32  pad64")
        for b, r in sorted(ladder.items()):
            dep, g, ctx = deployment(r), int(r["gamma"]), float(r["context"])
            grid = speedup_grid(dep, batch=[b], context=[ctx], gamma_max=g)
            m, c0 = float(grid.expected_tokens[g]), float(grid.c0[0, 0])
            run = min(b, CAP)
            capped = (run * m / cycle(dep, run, run, g, ctx)) / (b / c0)
            padded = m * c0 / cycle(dep, b, PADDED[bisect.bisect_left(PADDED, b)], g, ctx)
            print(f"{b:3d} {r['measured']:5.2f} {predict(r):5.2f} {capped:6.2f} {padded:6.2f}")
    print("== EAGLE-1 / EAGLE-3\n  B  meas  pred  meas/pred")
    for b in sorted(ladders[EAGLE1]):
        one, three = ladders[EAGLE1][b], ladders[EAGLE3][b]
        meas = one["measured"] / three["measured"]
        pred = predict(one) / predict(three)
        print(f"{b:3d} {meas:5.3f} {pred:5.3f} {meas / pred:6.3f}")


if __name__ == "__main__":
    main()
