"""TensorRT-LLM's speculative settings read back -- from the YAML file ``trtllm-serve
--extra_llm_api_options FILE`` / ``--config FILE`` reads, a ``trtllm-serve`` command line, or a
Kubernetes manifest running one -- and compared with a profile.

Reading follows TensorRT-LLM's own rules (``tensorrt_llm/llmapi/llm_args.py``, the two lines of
:mod:`spectune.engines.trtllm.releases`; ``tensorrt_llm/commands/serve.py`` @ 00209af1):

* speculation comes only from the YAML's ``speculative_config`` (a mapping with
  ``decoding_type``); the command line has no speculative flags;
* ``max_draft_len`` is the draft length; MTP on 1.2.x takes ``num_nextn_predict_layers``
  (default 1, copied into ``max_draft_len``), main remaps it onto ``max_draft_len``;
* ``draft_len_schedule`` ``{batch size: draft length}``: values from 0 to ``max_draft_len``; read
  with the 1.3.0rc-and-later meaning (a key ends a range, 0 above the last key, the smallest key
  maps to ``max_draft_len``), as a warning says; ``max_concurrency`` N (exclusive with it) turns
  speculation off above N;
* flags are underscore-spelled: ``--tp_size`` / ``--tensor_parallel_size``, ``--ep_size`` /
  ``--moe_expert_parallel_size``, ``--max_batch_size``, ``--max_num_tokens`` (the per-iteration
  token budget), ``--extra_llm_api_options`` / ``--config``; the YAML's top-level keys
  ``tensor_parallel_size``, ``moe_expert_parallel_size``, ``enable_attention_dp``,
  ``max_num_tokens`` say the same. Until 1.2 the YAML won over a flag; on main a flag wins
  (``update_llm_args_with_extra_dict``), so a difference is a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from spectune.base.errors import InputError
from spectune.base.limits import MAX_BATCH, MAX_CONTEXT, MAX_GPUS
from spectune.core.deployment import Deployment
from spectune.documents.inputs import short, yaml_documents
from spectune.engines.manifests import child, line_of
from spectune.engines.options import (
    Configured,
    draft_length,
    exchange_priced,
    flag_on,
    referenced_text,
    split_options,
    whole_number,
)

LAUNCHES = ("trtllm-serve MODEL", "python -m tensorrt_llm.commands.serve MODEL")
CONFIG_FORM = "trtllm-config-file"
#: top-level keys only TensorRT-LLM's LLM API files have (a vLLM --config file spells options
#: with dashes or as vLLM names them): any of them, or a speculative_config with a decoding_type,
#: make a YAML file TensorRT-LLM's
OWN_KEYS = ("extra_llm_api_options", "kv_cache_config", "cuda_graph_config", "enable_attention_dp",
            "moe_expert_parallel_size", "disable_overlap_scheduler", "enable_iter_perf_stats",
            "return_perf_metrics", "attention_dp_config", "moe_config")
ALIASES = {"Eagle": "Eagle3", "DraftTarget": "Draft_Target"}  # main turns Eagle into Eagle3
DEFAULT_NGRAM = 2  # NGramDecodingConfig.max_matching_ngram_size default (1.2 and main)
OPTIONS = {  # flag -> the LLM API key it sets
    "--tp_size": "tensor_parallel_size", "--tensor_parallel_size": "tensor_parallel_size",
    "--ep_size": "moe_expert_parallel_size", "--moe_expert_parallel_size": "moe_expert_parallel_size",
    "--max_num_tokens": "max_num_tokens", "--max_batch_size": "max_batch_size",
    "--enable_attention_dp": "enable_attention_dp",
}


def launch_args(words: list[str], i: int) -> list[str] | None:
    """The arguments when ``words[i:]`` launches ``trtllm-serve`` (``trtllm-serve [serve] MODEL``,
    ``python -m tensorrt_llm.commands.serve``), else None."""
    base = words[i].rsplit("/", 1)[-1]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if base == "trtllm-serve":
        return words[i + 2:] if nxt == "serve" else words[i + 1:]
    if base.startswith("python") and nxt == "-m" and i + 2 < len(words) \
            and words[i + 2] == "tensorrt_llm.commands.serve":
        return words[i + 3:]
    return None


def runs_image(image: str) -> bool:
    """TensorRT-LLM images (nvcr.io/nvidia/tensorrt-llm/release) start a shell, not the server."""
    return False


def claims_config_file(data: dict[str, Any]) -> bool:
    """Whether a YAML mapping is a TensorRT-LLM LLM API file (see :data:`OWN_KEYS`)."""
    spec = data.get("speculative_config")
    return any(k in data for k in OWN_KEYS) or (isinstance(spec, dict) and "decoding_type" in spec)


def read_config_file(conf: Configured, data: dict[str, Any], node: yaml.Node | None) -> None:
    """``conf`` from an ``--extra_llm_api_options`` YAML mapping (its node gives the lines)."""
    _apply_file(conf, data, node, conf.file)


def _line(node: yaml.Node | None, *keys: str) -> int | None:
    for k in keys:
        node = child(node, k)
    return line_of(node)


def _apply_file(conf: Configured, data: dict[str, Any], node: yaml.Node | None, file: str) -> None:
    for key in ("tensor_parallel_size", "moe_expert_parallel_size", "max_num_tokens", "max_batch_size",
                "enable_attention_dp"):
        if data.get(key) is not None:
            _setting(conf, key, data[key], file, _line(node, key))
    spec = data.get("speculative_config")
    line = _line(node, "speculative_config") or conf.line
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise InputError(f"speculative_config must be a mapping with decoding_type, got {short(spec)}",
                         file, line, "speculative_config")
    _speculative(conf, spec, file, line, child(node, "speculative_config"))


def _setting(conf: Configured, key: str, val: Any, file: str, line: int | None, what: str = "") -> None:
    """Apply LLM API option ``key`` (``what``: the flag that set it, for messages)."""
    what = what or key
    if key == "tensor_parallel_size":
        conf.tensor_parallel = whole_number(val, what, file, line, lo=1, hi=MAX_GPUS)
    elif key == "moe_expert_parallel_size":
        conf.expert_parallel = whole_number(val, what, file, line, lo=-1, hi=MAX_GPUS) > 1
    elif key == "max_num_tokens":
        conf.token_budget = whole_number(val, what, file, line, lo=1, hi=MAX_CONTEXT)
    elif key == "max_batch_size":
        whole_number(val, what, file, line, lo=1, hi=MAX_BATCH)
    elif key == "enable_attention_dp":
        conf.data_parallel = conf.tensor_parallel if flag_on(val) else 1


def _speculative(conf: Configured, spec: dict[str, Any], file: str, line: int | None,
                 node: yaml.Node | None = None) -> None:
    def at(key: str) -> int | None:  # the line of ``key``'s value, else the mapping's
        return line_of(child(node, key)) or line

    kind = spec.get("decoding_type")
    if not isinstance(kind, str) or not kind:
        raise InputError("speculative_config has no decoding_type (MTP, Eagle3, NGram, Draft_Target, ...): "
                         "TensorRT-LLM cannot tell which drafter to run", file, line, "decoding_type")
    if kind in ALIASES:
        conf.warnings.append(f"decoding_type {kind!r} is read as {ALIASES[kind]!r} (TensorRT-LLM's literal)")
        kind = ALIASES[kind]
    conf.method = kind
    model = spec.get("speculative_model_dir", spec.get("speculative_model"))
    conf.model = None if model is None else str(model)
    k = spec.get("max_draft_len")
    nextn = spec.get("num_nextn_predict_layers")
    if kind == "MTP" and nextn is not None:
        n = draft_length(nextn, "num_nextn_predict_layers", file, at("num_nextn_predict_layers"), lo=1)
        if k is not None and draft_length(k, "max_draft_len", file, at("max_draft_len")) != n:
            conf.warnings.append(f"max_draft_len = {short(k)} and num_nextn_predict_layers = {n}: "
                                 "TensorRT-LLM "
                                 "1.2.x runs num_nextn_predict_layers, main max_draft_len; read as "
                                 f"{n} (1.2.x)")
        k = n
    if k is None and kind == "MTP":
        conf.warnings.append("no max_draft_len: TensorRT-LLM takes the checkpoint's MTP layers (1.2.x: "
                             "num_nextn_predict_layers defaults to 1); read as 1")
        k = 1
    if k is None:
        raise InputError(f"speculative_config has no max_draft_len: TensorRT-LLM refuses {kind} without one "
                         "(max_draft_len must be > 0)", file, line, "max_draft_len")
    conf.gamma = draft_length(k, "max_draft_len", file, at("max_draft_len"), lo=1)
    if kind == "NGram":
        size = spec.get("max_matching_ngram_size")
        n = DEFAULT_NGRAM if size is None else whole_number(size, "max_matching_ngram_size", file,
                                                            at("max_matching_ngram_size"), lo=1)
        conf.prompt_lookup = (None, n)
    sched, conc = spec.get("draft_len_schedule"), spec.get("max_concurrency")
    if sched is not None and conc is not None:
        raise InputError("max_concurrency and draft_len_schedule are mutually exclusive (TensorRT-LLM main "
                         "refuses both)", file, line, "draft_len_schedule")
    if conc is not None:
        n = whole_number(conc, "max_concurrency", file, at("max_concurrency"), lo=1, hi=MAX_BATCH)
        sched = {n: conf.gamma}
    if sched is not None:
        where = at("draft_len_schedule" if conc is None else "max_concurrency")
        conf.schedule = _schedule(sched, conf.gamma, file, where)
        conf.schedule_active = True
        conf.warnings.append("draft_len_schedule read as TensorRT-LLM >= 1.3.0rc reads it (each key the last "
                             "batch size of its draft length, speculation off above the last key); 1.2.x "
                             "reads keys as lower bounds and shortens only the drafter's work")


def _schedule(sched: Any, k: int, file: str, line: int | None) -> list[tuple[int, int, int]]:
    """Validated as TensorRT-LLM's validate_draft_len_schedule_and_sort (main) does; the
    inclusive ranges it means, with 0 after the last key."""
    if not isinstance(sched, dict) or not sched:
        raise InputError("draft_len_schedule must be a non-empty mapping {batch size: draft length}",
                         file, line, "draft_len_schedule")
    out: dict[int, int] = {}
    for b, g in sched.items():
        key = whole_number(b, "draft_len_schedule batch size", file, line, lo=1, hi=MAX_BATCH)
        out[key] = draft_length(g, f"draft_len_schedule[{key}]", file, line)
        if out[key] > k:
            raise InputError(f"draft_len_schedule[{key}] = {out[key]} exceeds max_draft_len = {k} "
                             "(TensorRT-LLM "
                             "refuses it)", file, line, "draft_len_schedule")
    first = min(out)
    if out[first] != k:
        raise InputError(f"draft_len_schedule[{first}] (the smallest key) must equal max_draft_len = {k}, "
                         "got "
                         f"{out[first]} (TensorRT-LLM refuses it)", file, line, "draft_len_schedule")
    from spectune.engines.trtllm.settings import schedule_ranges

    last = max(out)
    return schedule_ranges(out, True, last + 1)


def read_args(conf: Configured, args: list[str], folder: Path) -> None:
    """``conf`` from ``trtllm-serve`` arguments: the YAML file they name first, flags over it."""
    flags: list[tuple[str, Any]] = []
    for opt, val in split_options(args):
        if opt is None:
            if conf.served_model is None and val != "serve":
                conf.served_model = val
            continue
        opt = opt.split("=", 1)[0]
        if opt in ("--extra_llm_api_options", "--config") and val is not None:
            path, text = referenced_text(val, folder, opt, conf.file, conf.line)
            if text is None:
                raise InputError(f"{opt} {val}: TensorRT-LLM takes its speculative settings from that file "
                                 f"only, and it is not here (looked at {path}); check the file itself "
                                 "(spectune check FILE PROFILE)", conf.file, conf.line)
            docs = yaml_documents(text, str(path), int_keys=True)
            if not docs or not isinstance(docs[0][0], dict):
                raise InputError(f"{opt} {val}: expected a YAML mapping of LLM API options", str(path), 1)
            where = conf.line
            _apply_file(conf, docs[0][0], docs[0][1], str(path))
            conf.line = where
            continue
        if opt in OPTIONS:
            flags.append((opt, val))
    for opt, val in flags:
        key = OPTIONS[opt]
        before = (conf.tensor_parallel, conf.expert_parallel, conf.token_budget, conf.data_parallel)
        flag = val is None and key == "enable_attention_dp"
        _setting(conf, key, True if flag else val, conf.file, conf.line, opt)
        after = (conf.tensor_parallel, conf.expert_parallel, conf.token_budget, conf.data_parallel)
        if before != after and before != (1, False, None, 1):
            conf.warnings.append(f"{opt} differs from the YAML's {key}: TensorRT-LLM up to 1.2 lets the YAML "
                                 "win, later releases the flag; read as the flag")


def same_method(configured: str, expected: str) -> bool:
    """Whether the configured decoding_type runs the drafter ``expected`` names."""
    return ALIASES.get(configured, configured) == expected


def profile_warnings(conf: Configured, dep: Deployment) -> list[str]:
    """``conf.warnings`` with what differs from the profile in ways TensorRT-LLM runs differently:
    the n-gram size the profile's acceptance holds for."""
    warnings = list(conf.warnings)
    want = dep.drafter.prompt_lookup_max
    if conf.speculate and conf.method == "NGram" and want and conf.prompt_lookup[1] != want:
        warnings.append(f"configured max_matching_ngram_size = {conf.prompt_lookup[1]} differs from the "
                        f"profile's prompt_lookup_max = {want}: the server drafts differently from what the "
                        "profile's acceptance holds for")
    return warnings


def priced_exchange(conf: Configured, dep: Deployment) -> tuple[str | None, str]:
    """The expert-parallel exchange priced for ``dep``: the engine profile's ``ep_exchange``
    (spectune does not read TensorRT-LLM's MoE communication settings); (None, "") when
    ``dep`` has no expert-parallel MoE."""
    if not exchange_priced(dep):
        return None, ""
    return dep.engine.ep_exchange, "the engine profile's ep_exchange (not read from TensorRT-LLM's settings)"
