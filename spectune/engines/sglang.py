"""Everything spectune knows about SGLang: its ``launch_server`` speculative flags and how
to emit them, how to read them back from a command line (the triple, NEXTN = EAGLE, the
adaptive config: largest key <= batch size, one slot's initial steps =
``--speculative-num-steps`` when it is a candidate, else the middle candidate), its
algorithms, defaults and limits.

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
* With speculation on and no ``--max-running-requests``, SGLang caps running requests at 48.

Metrics -- SGLang's ``/metrics``: only *gauges* of the mean, no per-position data.

* ``sglang:spec_accept_length`` — mean acceptance length (accepted drafts + the bonus
  token per verify) over SGLang's last logging period;
* ``sglang:spec_accept_rate`` — accepted draft tokens / proposed draft tokens, same period;
* newer releases also show ``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens``.

Labels include ``model_name`` and the ranks ``tp_rank``, ``dp_rank``...; tensor-parallel
ranks repeat the same figure, so only ``tp_rank="0"`` (or unlabelled) series are read, and
data-parallel ranks are averaged. Gauges carry no counts, so the window's figure is the
plain mean of the samples taken while speculation was reporting (value >= 1); it cannot
be weighted by drafts. The acceptance handed to ``recommend`` is the i.i.d. alpha whose
m(K) equals that mean (:meth:`Acceptance.from_mean_length`), and the document says so.

K is taken, in this order, from ``(length - 1) / rate`` (rounded), ``sglang:spec_num_steps``,
or the caller's ``num_speculative_tokens``.

Operating point: ``sglang:num_running_reqs`` (summed over DP ranks at each sample), the
deltas of ``sglang:prompt_tokens_histogram``, ``sglang:generation_tokens_histogram`` (when
SGLang runs with token histograms on) and ``sglang:inter_token_latency_seconds``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import spectune.documents.exposition as _exposition
from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Deployment
from spectune.core.plan import (
    Plan,
    Range,
    describe,
    describe_mix,
    lookup,
    make_plan,
    off_reason,
    smoothing_note,
)
from spectune.core.recommend import Recommendation
from spectune.core.tree import verify_width
from spectune.documents.exposition import Exposition, Series
from spectune.documents.inputs import json_document, short
from spectune.documents.observation import (
    AcceptanceInfo,
    EngineInfo,
    Observation,
    OperatingPoint,
    SegmentInfo,
    Source,
    Speculation,
    Window,
    distribution,
    histogram_summary,
    iso,
)
from spectune.documents.window import Capture, HistogramDelta, Segment, histogram_delta, split_segments
from spectune.engines.options import (
    GAMMA_LIMIT,
    Configured,
    draft_length,
    read_budget,
    referenced_text,
    split_options,
    whole_number,
)
from spectune.errors import (
    BadBodyFault,
    InputError,
    NoSpeculativeTraffic,
    ObserveUsageError,
    SpeculationNotEnabled,
)
from spectune.limits import MAX_BATCH, MAX_GAMMA, MAX_GPUS

NAME = "sglang"
LABEL = "SGLang"
SNIPPET_KINDS: tuple[str, ...] = ("sglang", "sglang-adaptive-config")
VERSION_PATH = "/get_server_info"  # HTTP path whose JSON has the server's "version"

# SGLang's DEFAULT_ADAPTIVE_CONFIG (python/sglang/srt/speculative/adaptive_spec_params.py,
# sglang 0.5.23): used when --speculative-adaptive is given without a config file.
BUILTIN_ADAPTIVE_CANDIDATES = {"1": [1, 3, 5, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]}

# --------------------------------------------------------------------------- settings emitted
# spectune drafter kind -> --speculative-algorithm
METHODS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN",
           "ngram": "NGRAM"}
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
NO_DP_ATTENTION = ("STANDALONE", "NGRAM")
NEEDS_PATH = ("STANDALONE", "EAGLE", "EAGLE3")
DEFAULT_ADAPTIVE_CONFIG = "spectune-sglang-adaptive.json"  # the file spectune writes the adaptive config to
SPEC_DEFAULT_MAX_RUNNING = 48  # running requests SGLang allows with speculation, unless told otherwise
LAUNCH = "python -m sglang.launch_server --model-path MODEL"  # the launch line the HTML report shows


@dataclass
class SglangSettings:
    args: list[str]  # empty = speculation off
    adaptive_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def sglang_algorithm(kind: str, dp: int = 1) -> str:
    """SGLang's ``--speculative-algorithm`` for a drafter kind; InputError if it cannot run."""
    if kind not in METHODS:
        raise InputError(f"SGLang cannot run a {kind!r} drafter: it has no speculative algorithm "
                         f"for it (SGLang algorithms spectune emits: "
                         f"{', '.join(METHODS.values())})", key="drafter.kind")
    algo = METHODS[kind]
    if dp > 1 and algo in NO_DP_ATTENTION:
        raise InputError(f"SGLang cannot run {algo} speculation with attention data parallelism "
                         f"(dp = {dp}): it refuses dp attention for {algo}", key="parallelism.dp")
    return algo


def sglang_settings(rec: Recommendation, weights: Mapping[int, float] | None = None,
                    plan: Plan | None = None,
                    adaptive_path: str = DEFAULT_ADAPTIVE_CONFIG) -> SglangSettings:
    dep = rec.deployment
    dp = dep.parallelism.dp
    algo = sglang_algorithm(dep.drafter.kind, dp)
    path = dep.drafter.path
    if algo in NEEDS_PATH and not path:
        raise InputError(f"SGLang's {algo} needs the drafter's weights: set 'path' (the Hugging "
                         "Face id or directory for --speculative-draft-model-path) in the drafter "
                         "profile", key="drafter.path")
    plan = plan or make_plan(rec, weights)
    out = SglangSettings([])
    if plan.max_gamma == 0:
        out.notes.append("gamma* = 0 at every operating point: speculation does not pay for this "
                         "deployment, so no speculative flags are emitted (SGLang runs without it): "
                         + off_reason(rec, plan, False))
        return out
    k = plan.max_gamma
    adaptive = False
    topk = dep.drafter.topk
    if plan.varies:
        why = None
        if topk > 1:
            why = f"SGLang's adaptive speculation needs --speculative-eagle-topk 1 (this tree has {topk})"
        elif algo not in ADAPTIVE_ALGORITHMS:
            why = f"SGLang's adaptive speculation supports only EAGLE/EAGLE3/NEXTN, not {algo}"
        elif dp > 1:
            why = (f"SGLang disables adaptive speculation under attention DP (dp = {dp}): its "
                   "decisions are not synchronised across DP ranks")
        if why:
            k = plan.static_gamma
            out.notes.append(f"gamma* changes with batch size ({describe(plan)}) but {why}: "
                             f"emitting one static gamma = {k}, the best mean predicted "
                             f"throughput over {describe_mix(plan)}")
            if k == 0:
                out.notes.append("that static gamma is 0, so no speculative flags are emitted: "
                                 + off_reason(rec, plan, True))
                return out
        else:
            adaptive = True
            out.adaptive_config = {str(lo): {"candidate_steps": [g]} for lo, _, g in plan.schedule}
            out.notes.append(
                f"gamma* changes with batch size ({describe(plan)}): write the adaptive config "
                f"with `spectune emit PROFILE sglang-adaptive-config > {adaptive_path}` "
                "(one candidate per batch-size range, so SGLang follows the recommendation)")
            smoothed = smoothing_note(plan)
            if smoothed:
                out.notes.append(smoothed)
    args = ["--speculative-algorithm", algo]
    if path:
        args += ["--speculative-draft-model-path", path]
    # A tree verifies num_draft_tokens per sequence (spectune.core.tree.verify_width); a chain k + 1.
    width = int(verify_width(dep.drafter, k))
    args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", str(topk),
             "--speculative-num-draft-tokens", str(width)]
    if algo == "NGRAM":
        args += ["--speculative-ngram-max-bfs-breadth", "1"]
    if adaptive:
        args += ["--speculative-adaptive", "--speculative-adaptive-config", adaptive_path]
    biggest = max(b for b, _ in plan.per_batch)
    if biggest > SPEC_DEFAULT_MAX_RUNNING:
        out.notes.append(f"SGLang caps running requests at {SPEC_DEFAULT_MAX_RUNNING} with "
                         f"speculation unless --max-running-requests is set; the profile declares "
                         f"batch sizes up to {biggest}")
    out.args = args
    return out



def render_args(settings: SglangSettings) -> str:
    """The flags on one line, shell-quoted (empty line = speculation off)."""
    return " ".join(shlex.quote(a) for a in settings.args) + "\n"


def render_adaptive(settings: SglangSettings) -> str:
    if settings.adaptive_config is None:
        raise InputError("gamma* does not change with batch size here (or SGLang cannot adapt for "
                         "this drafter): there is no adaptive config to write; the `sglang` flags "
                         "alone configure it (spectune emit PROFILE sglang, or spectune recommend "
                         "PROFILE --emit sglang)")
    items = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in settings.adaptive_config.items()]
    return "{\n" + ",\n".join(items) + "\n}\n"


def snippet(rec: Recommendation, kind: str, plan: Plan,
            adaptive_path: str | None = None) -> tuple[str, list[str] | None]:
    """The text of snippet ``kind`` (one of :data:`SNIPPET_KINDS`) and its notes.
    ``adaptive_path``: the file ``--speculative-adaptive-config`` points at."""
    settings = sglang_settings(rec, plan=plan, adaptive_path=adaptive_path or DEFAULT_ADAPTIVE_CONFIG)
    if kind == "sglang":
        return render_args(settings), settings.notes
    return render_adaptive(settings), None  # a file's content: no notes, not even the engine's


def reference(rec: Recommendation, plan: Plan,
              form: str) -> tuple[Callable[[int], int], dict[str, Any], list[str]]:
    """What ``spectune check`` compares against: the gamma the emitted flags run at each
    batch size, the fix (flags, and the adaptive config when they adapt) and its notes."""
    settings = sglang_settings(rec, plan=plan)
    doc: dict[str, Any] = {"engine": "sglang", "format": "command-line", "snippet": render_args(settings)}
    if not settings.args:
        doc["snippet"] = ("# remove every --speculative-* flag: speculation does not pay at these "
                          "operating points\n")
        return (lambda _b: 0), doc, settings.notes
    if settings.adaptive_config is not None:
        doc["adaptive_config"] = render_adaptive(settings)
        sched = list(plan.schedule)
        return (lambda b: lookup(sched, b)), doc, settings.notes
    steps = int(settings.args[settings.args.index("--speculative-num-steps") + 1])
    return (lambda _b: steps), doc, settings.notes


# --------------------------------------------------------------------------- reading back
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
                 "--enable-mixed-chunk"):
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
    conf.tensor_parallel = whole_number(vals.get("--tp-size", 1), "--tp-size", file, line, lo=1, hi=MAX_GPUS)
    ep = whole_number(vals.get("--ep-size", 1), "--ep-size", file, line, lo=1, hi=MAX_GPUS)
    conf.expert_parallel = ep > 1 or "--enable-ep-moe" in flags
    read_budget(conf, "--chunked-prefill-size", vals.get("--chunked-prefill-size"), line)
    conf.mixed_prefill = "--enable-mixed-chunk" in flags or None
    algo = vals.get("--speculative-algorithm")
    steps = vals.get("--speculative-num-steps")
    topk = vals.get("--speculative-eagle-topk")
    ndraft = vals.get("--speculative-num-draft-tokens")
    dp = whole_number(vals.get("--dp-size", 1), "--dp-size", file, line, lo=1)
    conf.data_parallel = dp if "--enable-dp-attention" in flags else 1
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


# --------------------------------------------------------------------------- metrics
PREFIX = "sglang:"
ACCEPT_LENGTH = "sglang:spec_accept_length"
SPEC_METRIC = ACCEPT_LENGTH  # shown only while speculating
ACCEPT_RATE = "sglang:spec_accept_rate"
NUM_STEPS = "sglang:spec_num_steps"
RUNNING = "sglang:num_running_reqs"
PROMPT = "sglang:prompt_tokens_histogram"
GENERATION = "sglang:generation_tokens_histogram"
ITL = "sglang:inter_token_latency_seconds"
# Every metric read, by type (Prometheus queries them by type: spectune.observe.prometheus).
COUNTERS: tuple[str, ...] = ()
HISTOGRAMS: tuple[str, ...] = (PROMPT, GENERATION, ITL)
GAUGES: tuple[str, ...] = (ACCEPT_LENGTH, ACCEPT_RATE, NUM_STEPS, RUNNING)
RESET_COUNTER: str | None = None  # no counter: gauges only
SPECULATION_SERIES: tuple[str, ...] = (ACCEPT_LENGTH,)  # sampled in a window: the server speculates
METRICS = "sglang:spec_accept_length / spec_accept_rate gauges (means, no per-position data)"
NO_POSITIONS = ("SGLang reports only the mean acceptance length and rate (gauges), no per-position "
                "acceptance; the acceptance given to recommend is the i.i.d. alpha matching the "
                "mean length, not measured per position")


def is_sglang(expo: Exposition) -> bool:
    return _exposition.has_prefix(expo, PREFIX)


def resolve_model(expo: Exposition, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them."""
    return _exposition.resolve_model(expo, PREFIX, wanted)


def _select(model: str | None) -> Callable[[Series], bool]:
    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None) and s.label("tp_rank") in ("0", None) \
            and s.label("pp_rank") in ("0", None)

    return where


def check_metrics(expo: Exposition, model: str | None) -> None:
    """Raise :class:`SpeculationNotEnabled` when the speculative gauges are absent."""
    if not expo.get(ACCEPT_LENGTH, _select(model)):
        raise SpeculationNotEnabled("this SGLang server shows no sglang:spec_accept_length: "
                                    "speculative decoding is not enabled (or metrics are too old)")


def open_window(expo: Exposition, model_name: str | None) -> tuple[str | None, bool]:
    """From the first scrape, before the window: the model to observe, its speculative
    gauges checked (fails fast without them)."""
    model = resolve_model(expo, model_name)
    check_metrics(expo, model)
    return model, True


def analyse_window(capture: Capture, model: str | None, opened: Any = None,
                   num_speculative_tokens: int | None = None) -> Observation:
    """:func:`analyse`, given what :func:`open_window` found (None: checked on the last scrape)."""
    return analyse(capture, model, num_speculative_tokens, checked=bool(opened))


def _mean(expo: Exposition, name: str, where: Callable[[Series], bool]) -> float | None:
    vals = [s.value for s in expo.get(name, where)]
    return sum(vals) / len(vals) if vals else None


def _hist(snaps: Sequence[Exposition], segs: Sequence[Segment], name: str,
          where: Callable[[Series], bool]) -> HistogramDelta | None:
    total: HistogramDelta | None = None
    for g in segs:
        h = histogram_delta(snaps[g.first], snaps[g.last], name, where)
        if h is not None:
            total = h if total is None else total + h
    return total


def analyse(capture: Capture, model: str | None, num_speculative_tokens: int | None = None, *,
            checked: bool = False) -> Observation:
    """The Observation of one captured window of an SGLang server. ``checked``: the caller
    already ran :func:`check_metrics` (on the first scrape); otherwise it runs here on the last."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = _select(model)
    if not checked:
        check_metrics(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)
    seconds = times[-1] - times[0]

    lengths, rates, steps = [], [], []
    for e in snaps:
        length = _mean(e, ACCEPT_LENGTH, where)
        for name, value, lo, hi in ((ACCEPT_LENGTH, length, 0.0, MAX_GAMMA + 1.0),
                                    (ACCEPT_RATE, _mean(e, ACCEPT_RATE, where), 0.0, 1.0),
                                    (NUM_STEPS, _mean(e, NUM_STEPS, where), 0.0, float(MAX_GAMMA))):
            if value is not None and not lo <= value <= hi:  # NaN fails too
                raise BadBodyFault(f"{name} is {value:g}; a {'rate' if hi == 1.0 else 'length'} in "
                                   f"[{lo:g}, {hi:g}] was expected")
        if length is None or length < 1.0:  # 0: nothing reported for this period
            continue
        lengths.append(length)
        rate = _mean(e, ACCEPT_RATE, where)
        if rate is not None:
            rates.append(rate)
        st = _mean(e, NUM_STEPS, where)
        if st is not None and st >= 1:
            steps.append(st)
    if not lengths:
        raise NoSpeculativeTraffic(
            f"no speculative data in the window: sglang:spec_accept_length was 0 in all "
            f"{len(snaps)} samples over {seconds:.1f} s; SGLang's gauges cannot tell idle "
            "speculation from speculation that is switched off")
    tau = sum(lengths) / len(lengths)
    rate_mean = sum(rates) / len(rates) if rates else None
    if rate_mean and rate_mean > 0 and tau > 1:
        k = max(1, round((tau - 1.0) / rate_mean))
        k_from = "(mean length - 1) / mean rate"
    elif steps:
        k = round(sum(steps) / len(steps))
        k_from = "sglang:spec_num_steps"
    elif num_speculative_tokens:
        k = num_speculative_tokens
        k_from = "--num-speculative-tokens"
    else:
        raise ObserveUsageError("SGLang does not show the draft length here; give it with "
                                "--num-speculative-tokens K")
    if not 1 <= k <= MAX_GAMMA:
        raise BadBodyFault(f"SGLang's gauges give a draft length K = {k} ({k_from}); spectune evaluates "
                           f"1 to {MAX_GAMMA}")
    notes.append(f"K = {k} from {k_from}")
    notes.append(f"SGLang gauges hold the mean of SGLang's last logging period; the window's figure "
                 f"is the unweighted mean of {len(lengths)} samples that reported (value >= 1)")
    tau_c = min(max(tau, 1.0), k + 1.0)
    version = capture.engine_version
    vtxt = f"SGLang {version}" if version else "SGLang"
    mtxt = f", model {model}" if model else ""
    a = Acceptance.from_mean_length(
        tau_c, k, f"measured: {vtxt} at {capture.source}{mtxt}, {iso(times[0])} + {seconds:.0f} s "
                  "(no per-position data): i.i.d. alpha from mean acceptance length")
    basis = "one segment (no counter reset)" if len(segs) == 1 else \
        f"{len(segs)} segments (counter resets); gauges averaged over all samples"
    spec = Speculation(None, None, None, k, None, tau, rate_mean, None, NO_POSITIONS, basis)
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    missing = [n for n, h in (("prompt", PROMPT), ("generation", GENERATION))
               if not snaps[-1].has(h + "_count")]
    note = "tokens per engine step: not exposed by SGLang"
    if missing:
        note += f"; {' and '.join(missing)} lengths: not exposed (SGLang's token histograms are off)"
    op = OperatingPoint(
        running=distribution(running),
        prompt_tokens=histogram_summary(_hist(snaps, segs, PROMPT, where)),
        generation_tokens=histogram_summary(_hist(snaps, segs, GENERATION, where)),
        iteration_tokens=None,
        inter_token_latency_seconds=histogram_summary(_hist(snaps, segs, ITL, where)),
        note=note)
    return Observation(
        engine=EngineInfo("sglang", version, METRICS),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), seconds, capture.interval_seconds, len(snaps),
                      capture.failed_samples),
        speculation=spec,
        segments=tuple(SegmentInfo(iso(g.start) or "", iso(g.end) or "", g.seconds, g.samples, None, None,
                                   None, g.reset_before) for g in segs),
        operating_point=op,
        acceptance=AcceptanceInfo("mean-length", a.rates, a.source),
        notes=tuple(notes),
    )
