"""SGLang's ``launch_server`` speculative flags read back from a command line (the triple,
NEXTN = EAGLE, the adaptive config: largest key <= batch size, one slot's initial steps =
``--speculative-num-steps`` when it is a candidate, else the middle candidate) and compared
with a profile.

Verified against SGLang's own source: the PyPI wheel sglang 0.5.23, whose flags are
declared in ``python/sglang/srt/arg_groups/fields/spec.py`` (sgl-project/sglang; indexed
at commit 7e997c672532a8677cb03a2f5cf588419c4b4d25) and resolved in
``python/sglang/srt/arg_groups/speculative_hook.py``; the argument list is kept as the
test fixture ``tests/data/sglang_spec_args.json``.

* ``--speculative-algorithm``: builtins EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM (DFLASH,
  DSPARK, UNO). NEXTN is resolved to EAGLE (``_resolve_speculative_algorithm_alias``).
* ``--speculative-num-steps`` / ``--speculative-eagle-topk`` /
  ``--speculative-num-draft-tokens``: always all three. With num-steps unset SGLang
  asserts that the other two are unset too and picks its own defaults; with topk 1 it
  forces num-draft-tokens = num-steps + 1. spectune emits gamma, 1, gamma + 1 for a chain;
  for a draft tree (drafter ``topk`` > 1, EAGLE-2) gamma, topk and the tree's verify width
  (``num_draft_tokens``, capped by the candidates gamma steps can produce:
  :func:`spectune.core.tree.verify_width`).
* NGRAM sets eagle-topk from ``--speculative-ngram-max-bfs-breadth`` (default 10), so
  spectune also passes breadth 1 to keep one chain of gamma drafts.
* ``--speculative-adaptive`` + ``--speculative-adaptive-config FILE``: a JSON object whose
  integer-string keys are the lower bounds of batch-size ranges, each with
  ``candidate_steps`` (``speculative/adaptive_spec_params.py``, routed by
  ``speculative/adaptive_step_router.py``: the largest key <= the batch size). Only
  EAGLE / EAGLE3 (NEXTN) with topk 1 and without attention DP; ``--speculative-num-steps``
  must be one of the candidates. spectune gives each range one candidate, gamma for that
  range, so the choice is the recommendation's, not the EMA's.
* STANDALONE and NGRAM refuse attention DP ("does not support dp attention").
* With speculation on and no ``--max-running-requests``, SGLang caps running requests at 48
  (:data:`~spectune.engines.sglang.defaults.SPEC_DEFAULT_MAX_RUNNING`).
* The expert-parallel exchange: ``--moe-a2a-backend`` (``python/sglang/srt/arg_groups/fields/
  exec_.py`` of the 0.5.23 wheel: default ``none``, choices :data:`A2A_BACKENDS`) and
  ``--deepep-mode`` (``auto``, the default, "means `low_latency` for decode batch and `normal`
  for prefill batch"; ``normal``; ``low_latency``); before ``--moe-a2a-backend`` existed,
  ``--enable-deepep-moe`` turned DeepEP on (``server_args.py`` of sglang 0.4.5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spectune.base.errors import (
    InputError,
)
from spectune.base.limits import MAX_BATCH, MAX_GPUS
from spectune.core.cost.comm import AG_RS, DEEPEP_LL
from spectune.core.deployment import Deployment
from spectune.core.plan import (
    Range,
)
from spectune.core.tree import verify_width
from spectune.documents.inputs import json_document, short
from spectune.engines.options import (
    GAMMA_LIMIT,
    Configured,
    draft_length,
    ep_setting,
    exchange_priced,
    read_budget,
    referenced_text,
    split_options,
    unpriced_exchange,
    whole_number,
)
from spectune.engines.sglang.defaults import BUILTIN_ADAPTIVE_CANDIDATES, SPEC_DEFAULT_MAX_RUNNING

# --------------------------------------------------------------------------- expert-parallel exchange
#: ``--moe-a2a-backend`` and ``--deepep-mode`` choices (sglang 0.5.23 arg_groups/fields/exec_.py)
A2A_BACKENDS = ("none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
                "deepep_v2", "pplx", "ascend_tp", "flashinfer_megamoe")
DEEPEP_MODES = ("auto", "normal", "low_latency")
A2A, MODE, LEGACY_DEEPEP = "--moe-a2a-backend", "--deepep-mode", "--enable-deepep-moe"
PRICED = f"{A2A} none or deepep with {MODE} auto or low_latency"


def priced_exchange(conf: Configured, dep: Deployment) -> tuple[str | None, str]:
    """The expert-parallel exchange (:data:`~spectune.core.deployment.EP_EXCHANGES`) the
    configured SGLang runs at decode for ``dep`` and how it was set; (None, "") when ``dep``
    has no expert-parallel MoE. ``none`` gathers and scatters around the experts
    (allgather_reducescatter, profiles/engines/sglang.yaml); ``deepep`` runs DeepEP's
    low-latency kernels on decode batches unless ``--deepep-mode normal``. InputError (exit 2)
    naming the setting for a backend spectune cannot price."""
    if not exchange_priced(dep):
        return None, ""
    name = A2A if A2A in conf.ep_settings else LEGACY_DEEPEP if LEGACY_DEEPEP in conf.ep_settings else None
    if name is None:
        return AG_RS, f"SGLang's default {A2A} none (none configured)"
    value, line = conf.ep_settings[name]
    at = f" (line {line})" if line else ""
    if value == "none":
        return AG_RS, f"{A2A} none{at}"
    if value != "deepep":
        raise unpriced_exchange(conf, name, "its dispatch and combine are not priced", PRICED)
    mode = conf.ep_settings.get(MODE, ("auto", None))[0]
    if mode == "normal":
        raise unpriced_exchange(conf, MODE, "DeepEP's normal (high-throughput) kernels are not priced "
                                "at decode", PRICED)
    return DEEPEP_LL, f"{name if name == A2A else LEGACY_DEEPEP} deepep{at}, {MODE} {mode}"


# --------------------------------------------------------------------------- reading back
# the command lines :func:`launch_args` recognises, as messages name them
LAUNCHES = ("python -m sglang.launch_server", "sglang serve")


def launch_args(words: list[str], i: int) -> list[str] | None:
    """The arguments when ``words[i:]`` launches SGLang (``sglang serve``, ``python -m
    sglang.launch_server``), else None."""
    base = words[i].rsplit("/", 1)[-1]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if base == "sglang" and nxt == "serve":
        return words[i + 2:]
    if base.startswith("python") and nxt == "-m" and i + 2 < len(words) \
            and words[i + 2] in ("sglang.launch_server", "sglang.srt.server"):
        return words[i + 3:]
    return None


CONFIG_FORM: str | None = None  # SGLang is configured by flags: no config file of its own is read


def claims_config_file(data: dict[str, Any]) -> bool:
    """SGLang has no config file spectune reads (its flags are read from a command line)."""
    return False


def read_config_file(conf: Configured, data: dict[str, Any], node: Any) -> None:
    """Never called (:func:`claims_config_file` claims no file)."""
    raise InputError("SGLang has no configuration file spectune reads: give its launch command", conf.file)


def runs_image(image: str) -> bool:
    """SGLang images have no ``launch_server`` entrypoint: a command is always given."""
    return False


def read_args(conf: Configured, args: list[str], folder: Path) -> None:
    vals: dict[str, Any] = {}
    flags = set()
    for opt, val in split_options(args):
        if opt is None:
            continue
        o = opt.replace("_", "-")
        if o in ("--speculative-adaptive", "--enable-dp-attention", "--enable-ep-moe",
                 "--enable-mixed-chunk", LEGACY_DEEPEP):
            flags.add(o)  # store_true: a positional paired with it by _split_options is not its value
            continue
        if o == "--speculative-draft-model":
            o = "--speculative-draft-model-path"
        if o in ("--dp", "--data-parallel-size"):
            o = "--dp-size"
        o = {"--tp": "--tp-size", "--tensor-parallel-size": "--tp-size", "--ep": "--ep-size",
             "--expert-parallel-size": "--ep-size", "--model": "--model-path"}.get(o, o)
        vals[o] = val
    file, line = conf.file, conf.line
    if vals.get("--model-path") is not None:
        conf.served_model = str(vals["--model-path"])
    tp = whole_number(vals.get("--tp-size", 1), "--tp-size", file, line, lo=1, hi=MAX_GPUS)
    dp = whole_number(vals.get("--dp-size", 1), "--dp-size", file, line, lo=1)
    if "--enable-dp-attention" in flags:
        # With attention DP, --tp-size is every GPU of the server and each attention rank runs
        # tp/dp of them (sglang/srt/layers/dp_attention.py compute_dp_attention_world_info:
        # attn_tp_size = tp_size // dp_size): spectune's tp is that per-rank TP.
        if tp % dp:
            raise InputError(f"--tp-size {tp} is not a multiple of --dp-size {dp} (with --enable-dp-"
                             "attention SGLang splits its --tp-size GPUs into dp attention ranks)",
                             file, line, "--dp-size")
        conf.tensor_parallel, conf.data_parallel = tp // dp, dp
    else:  # plain --dp-size: independent replicas, each a deployment of its own
        conf.tensor_parallel, conf.data_parallel = tp, 1
    ep = whole_number(vals.get("--ep-size", 1), "--ep-size", file, line, lo=1, hi=MAX_GPUS)
    conf.expert_parallel = ep > 1 or "--enable-ep-moe" in flags
    read_budget(conf, "--chunked-prefill-size", vals.get("--chunked-prefill-size"), line)
    conf.mixed_prefill = "--enable-mixed-chunk" in flags or None
    if LEGACY_DEEPEP in flags:
        conf.ep_settings[LEGACY_DEEPEP] = ("deepep", line)
    for opt, choices in ((A2A, A2A_BACKENDS), (MODE, DEEPEP_MODES)):
        if opt in vals:
            ep_setting(conf, opt, vals[opt], line, choices, "SGLang 0.5.23")
    if vals.get("--max-running-requests") is not None:
        conf.max_running = whole_number(vals["--max-running-requests"], "--max-running-requests", file,
                                        line, lo=1, hi=MAX_BATCH)
    conf.running_cap = SPEC_DEFAULT_MAX_RUNNING if conf.max_running is None else 0
    algo = vals.get("--speculative-algorithm")
    steps = vals.get("--speculative-num-steps")
    topk = vals.get("--speculative-eagle-topk")
    ndraft = vals.get("--speculative-num-draft-tokens")
    adaptive = "--speculative-adaptive" in flags
    cfg_path = vals.get("--speculative-adaptive-config")
    conf.sglang = {"num_steps": None, "eagle_topk": None, "num_draft_tokens": None,
                   "adaptive": adaptive, "adaptive_config": cfg_path}
    if algo is None or str(algo).upper() == "NONE":
        return
    algo = str(algo).upper()
    conf.method = algo
    conf.model = vals.get("--speculative-draft-model-path")
    s = draft_length(steps, "--speculative-num-steps", file, line) if steps is not None else None
    t = whole_number(topk, "--speculative-eagle-topk", file, line, lo=1) if topk is not None else None
    n = None
    if ndraft is not None:  # NGRAM drafts num-draft-tokens - 1 tokens: a draft length
        n = (whole_number(ndraft, "--speculative-num-draft-tokens", file, line, 1, GAMMA_LIMIT + 1,
                  f"NGRAM drafts num-draft-tokens - 1; spectune evaluates draft lengths up to {GAMMA_LIMIT}")
             if algo == "NGRAM" else whole_number(ndraft, "--speculative-num-draft-tokens", file, line, lo=1))
    if algo == "NGRAM":  # SGLang takes NGRAM's topk from the BFS breadth (default 10)
        breadth = vals.get("--speculative-ngram-max-bfs-breadth")
        t = (whole_number(breadth, "--speculative-ngram-max-bfs-breadth", file, line, lo=1)
             if breadth is not None else 10)
    conf.sglang.update(num_steps=s, eagle_topk=t, num_draft_tokens=n)
    candidates: dict[int, list[int]] | None = None
    if adaptive:
        candidates, note = _adaptive(cfg_path, folder, file, line)
        if note:
            conf.warnings.append(note)
        why = None
        if algo not in ("EAGLE", "EAGLE3", "NEXTN"):
            why = f"{algo} (only EAGLE/EAGLE3/NEXTN adapt)"
        elif conf.data_parallel > 1:
            why = "attention DP"
        elif t not in (None, 1):
            why = f"--speculative-eagle-topk {t} (only topk 1 adapts)"
        if why:
            conf.warnings.append(f"SGLang turns --speculative-adaptive off for {why}: static "
                                 "parameters are evaluated")
            adaptive = False
            candidates = None
    if candidates:
        union = sorted({g for c in candidates.values() for g in c})
        if s is None:
            s = union[len(union) // 2]
        if s not in union:
            raise InputError(f"--speculative-num-steps={s} is not among the adaptive candidate_steps "
                             f"{union}: SGLang refuses to start", file, line)
        keys = sorted(candidates)
        sched: list[Range] = []
        for i, lo in enumerate(keys):
            hi = keys[i + 1] - 1 if i + 1 < len(keys) else max(lo, 1 << 20)
            cands = sorted(set(candidates[lo]))
            g = s if s in cands else cands[len(cands) // 2]
            sched.append((max(lo, 1), hi, g))
            if len(cands) > 1:
                conf.warnings.append(f"adaptive range from batch {lo} has candidates {cands}: "
                                     f"evaluated at its initial steps {g}; SGLang's EMA moves it "
                                     "with the acceptance it observes")
        if sched and sched[0][0] != 1:
            sched[0] = (1, sched[0][1], sched[0][2])
        conf.schedule, conf.schedule_active = sched, True
        conf.gamma = s
        conf.sglang["num_steps"] = s
        return
    if s is None:
        given = [o for o, v in (("--speculative-eagle-topk", topk),
                                ("--speculative-num-draft-tokens", ndraft)) if v is not None]
        if given:
            raise InputError(f"partial SGLang speculative triple: --speculative-num-steps is missing "
                             f"while {' and '.join(given)} {'is' if len(given) == 1 else 'are'} set "
                             "(SGLang asserts at startup); give all three", file, line)
        raise InputError(f"{algo} speculation without --speculative-num-steps: SGLang then picks "
                         "its own per-architecture defaults, which spectune cannot evaluate; give "
                         "--speculative-num-steps, --speculative-eagle-topk and "
                         "--speculative-num-draft-tokens", file, line)
    if algo != "NGRAM" and (t is None or n is None):
        raise InputError("partial SGLang speculative triple: give --speculative-num-steps, "
                         "--speculative-eagle-topk and --speculative-num-draft-tokens together "
                         "(a partial triple crashes the server)", file, line)
    if t is not None and t > 1:
        conf.warnings.append(f"--speculative-eagle-topk {t} drafts a tree; the profile's drafter "
                             f"is priced (describe this tree with topk: {t} and num_draft_tokens: "
                             f"{n} in the drafter profile)")
    elif n is not None and n != s + 1 and algo != "NGRAM":
        conf.warnings.append(f"--speculative-num-draft-tokens {n} != num-steps + 1 = {s + 1}; SGLang "
                             f"resets it to {s + 1} with topk 1")
    conf.gamma = s if algo != "NGRAM" or n is None else n - 1
    conf.sglang["num_steps"] = s


def _adaptive(path: str | None, folder: Path, file: str,
              line: int | None = None) -> tuple[dict[int, list[int]] | None, str | None]:
    if path is None:
        return {int(k): v for k, v in BUILTIN_ADAPTIVE_CANDIDATES.items()}, (
            "--speculative-adaptive without a config: SGLang's built-in candidates are evaluated")
    p, text = referenced_text(path, folder, "--speculative-adaptive-config", file, line)
    if text is None:
        return None, (f"no adaptive config {path} here (looked at {p}); the static "
                      "--speculative-num-steps is evaluated")
    data = json_document(text, str(p))
    if not isinstance(data, dict):
        raise InputError("the adaptive config must be a JSON object", str(p), 1)
    out: dict[int, list[int]] = {}
    for key, entry in data.items():
        if not (key.isascii() and key.isdigit()):  # int() also reads other scripts' digits
            continue
        at = text.count("\n", 0, max(text.find(json.dumps(key)), 0)) + 1  # the key's line
        if len(key) > len(str(MAX_BATCH)) or int(key) > MAX_BATCH:
            raise InputError(f"BS {short(key)}: expected a batch size from 0 to {MAX_BATCH:,}", str(p), at)
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= GAMMA_LIMIT for s in steps):
            raise InputError(f"BS {key}: candidate_steps must be a non-empty list of whole numbers "
                             f"from 0 to {GAMMA_LIMIT}, got {short(steps)}", str(p), at)
        out[int(key)] = steps
    if not out:
        raise InputError("the adaptive config has no integer batch-size key", str(p))
    return out, None


# --------------------------------------------------------------------------- against a profile
def same_method(configured: str, expected: str) -> bool:
    """Whether the configured algorithm runs the drafter ``expected`` names (NEXTN = EAGLE)."""
    alias = {"NEXTN": "EAGLE"}
    return alias.get(configured, configured) == alias.get(expected, expected)


def profile_warnings(conf: Configured, dep: Deployment) -> list[str]:
    """``conf.warnings`` as they stand against the profile: a tree the profile describes is
    priced as one (no "drafts a tree" warning), but a verify width other than the profile's
    is said."""
    warnings = list(conf.warnings)
    if conf.sglang and conf.sglang.get("eagle_topk") == dep.drafter.topk > 1:
        warnings = [w for w in warnings if "drafts a tree" not in w]
        n_draft, steps = conf.sglang.get("num_draft_tokens"), conf.sglang.get("num_steps")
        width = int(verify_width(dep.drafter, steps)) if steps else None
        if n_draft is not None and width is not None and n_draft != width:
            warnings.append(f"--speculative-num-draft-tokens {n_draft} differs from the profile's "
                            f"tree ({width} verified tokens at {steps} steps): the prediction "
                            "assumes the profile's")
    return warnings
