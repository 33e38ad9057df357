"""Loading deployment profiles and built-in GPU / model / drafter / engine profiles.

Every error names the file, the line, the key path and what was expected; unknown keys
are refused with the closest known key suggested. Built-ins live in ``profiles/``
(installed inside the package as ``spectune/_profiles``); a user refers to them by file
name or alias.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from spectune.acceptance import Acceptance
from spectune.deployment import (
    Deployment,
    Engine,
    Parallelism,
    Workload,
    parallelism_problem,
    workload_problem,
)
from spectune.errors import InputError
from spectune.hardware import DTYPE_BYTES, GPU, Kernels
from spectune.hf_config import DTYPE_KEYS, eagle_head, model_from_hf_config
from spectune.inputs import (
    input_file_problem,
    json_document,
    number_problem,
    read_input,
    short,
    yaml_document,
)
from spectune.limits import (
    BANDWIDTH_TBPS,
    COST_RATIO,
    DEFAULT_GAMMA_MAX,
    DEFAULT_TIE_TOLERANCE,
    FRACTION,
    LINK_GBPS,
    LINK_LATENCY_US,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GAMMA,
    MAX_GPUS,
    MAX_POSITIONS,
    MAX_TIE_TOLERANCE,
    MEMORY_GB,
    OVERHEAD_US,
    PEAK_TFLOPS,
)
from spectune.model import DRAFTER_KINDS, UNIFORM, Drafter, Model, MoE, Routing

KINDS = ("gpus", "models", "drafters", "engines")
KeyPath = tuple[str, ...]


def profiles_dir() -> Path:
    """Where the built-in profiles are: inside the installed package, or the repo's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_profiles", here.parent / "profiles"):
        if candidate.is_dir():
            return candidate
    raise InputError("built-in profiles are missing from this installation (reinstall spectune)")


# --------------------------------------------------------------------------- YAML + lines
@dataclass
class Doc:
    """Parsed YAML plus the line of every key path, for error messages."""

    data: Any
    file: str
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, path: KeyPath) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: KeyPath, message: str) -> InputError:
        return InputError(message, self.file, self.line(path), ".".join(path) or None)


def _walk(node: Any, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    import yaml

    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*path, str(key_node.value))
            lines[key] = key_node.start_mark.line + 1
            _walk(value_node, key, lines)
            lines[key] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _walk(v, (*path, str(i)), lines)


def parse_yaml(text: str, file: str) -> Doc:
    """Parse YAML text (bounded and checked by :mod:`spectune.inputs`), keeping the line of
    each key. Every problem becomes InputError."""
    data, node = yaml_document(text, file)
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return Doc(data, file, lines)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path`` (``-``: stdin), bounded; InputError (exit 2) naming ``path``
    as given when it is missing, unreadable, not a regular file, too large or not UTF-8."""
    return read_input(str(path))


def read_doc(path: Path) -> Doc:
    return parse_yaml(read_text(path), str(path))


# --------------------------------------------------------------------------- validation
def _check_keys(doc: Doc, path: KeyPath, value: Any, allowed: tuple[str, ...],
                required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise doc.error(path, f"expected a mapping with keys {', '.join(allowed)}, "
                              f"got {type(value).__name__}")
    for key in value:
        if key not in allowed:
            key = str(key)
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
            raise doc.error((*path, key), f"unknown key {short(key)}{hint}")
    for key in required:
        if key not in value:
            raise doc.error(path, f"missing required key {key!r}")
    return value


def _number(doc: Doc, path: KeyPath, value: Any, *, positive: bool = True, integer: bool = False,
            lo: float | None = None, hi: float | None = None,
            bounds: tuple[float, float] | None = None) -> float:
    """A finite number (whole with ``integer``; > 0 with ``positive``; in [lo, hi] or
    ``bounds``, a (lo, hi) pair from :mod:`spectune.limits`)."""
    if bounds is not None:
        lo, hi = bounds
    problem = number_problem(value, integer=integer, positive=positive, lo=lo, hi=hi)
    if problem:
        raise doc.error(path, problem)
    return float(value)


def _int_list(doc: Doc, path: KeyPath, value: Any, hi: float) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise doc.error(path, f"expected a non-empty list of whole numbers, got {short(value)}")
    return tuple(int(_number(doc, (*path, str(i)), v, integer=True, lo=1, hi=hi))
                 for i, v in enumerate(value))


def _str(doc: Doc, path: KeyPath, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise doc.error(path, f"expected a non-empty string, got {short(value)}")
    return value


# --------------------------------------------------------------------------- built-ins
@cache
def _index(kind: str) -> dict[str, Path]:
    """name or alias (lowercase) -> file, for one kind of built-in profile."""
    import yaml

    folder = profiles_dir() / kind
    out: dict[str, Path] = {}
    for f in sorted(folder.glob("*.yaml")):
        out[f.stem.lower()] = f
    safe = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for f in sorted(folder.glob("*.yaml")):
        head = yaml.load(f.read_text(encoding="utf-8"), Loader=safe) or {}
        for alias in head.get("aliases") or []:
            out.setdefault(str(alias).lower(), f)
        if head.get("name"):
            out.setdefault(str(head["name"]).lower(), f)
    return out


def builtin_names(kind: str) -> list[str]:
    return sorted(f.stem for f in (profiles_dir() / kind).glob("*.yaml"))


def builtin_path(kind: str, name: str, doc: Doc | None = None, path: KeyPath = ()) -> Path:
    """The file of built-in profile ``name``; an error suggests the closest names."""
    folder = profiles_dir() / kind
    direct = folder / f"{name.lower()}.yaml"
    if direct.is_file():
        return direct
    index = _index(kind)
    if name.lower() in index:
        return index[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(index), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    msg = f"unknown {kind[:-1]} {name!r}{hint} (see: spectune profiles list {kind})"
    if doc is not None:
        raise doc.error(path, msg)
    raise InputError(msg)


def builtin_aliases(kind: str, name: str) -> list[str]:
    """Every name and alias of the built-in profile ``name`` answers to (empty when it is
    not a built-in)."""
    index = _index(kind)
    f = index.get(name.lower())
    return sorted(k for k, v in index.items() if v == f) if f is not None else []


GPU_KEYS = ("name", "aliases", "memory_gb", "memory_bytes", "hbm_bandwidth_tbps", "peak_tflops",
            "link_bandwidth_gbps", "link_latency_us", "achievable", "confidence", "notes",
            "kernels")
#: ``kernels:`` keys of a GPU profile (spectune.hardware.Kernels); ``*_us`` are microseconds.
KERNEL_KEYS = tuple(f.name + ("_us" if f.name.endswith(("_call", "_expert")) else "")
                    for f in fields(Kernels) if f.name != "source")


def _kernels(doc: Doc, path: KeyPath, value: Any) -> Kernels:
    v = _check_keys(doc, path, value, (*KERNEL_KEYS, "source"), KERNEL_KEYS)
    vals: dict[str, Any] = {}
    for k in KERNEL_KEYS:
        frac = k.endswith("_fraction")
        x = _number(doc, (*path, k), v[k], positive=frac, lo=None if frac else 0.0,
                    hi=1.0 if frac else None)
        vals[k.removesuffix("_us")] = x * 1e-6 if k.endswith("_us") else x
    return Kernels(**vals, source=str(v.get("source", "")))


def gpu_from_mapping(doc: Doc, path: KeyPath, value: Any, key: str = "custom") -> GPU:
    v = _check_keys(doc, path, value, GPU_KEYS,
                    ("memory_gb", "hbm_bandwidth_tbps", "peak_tflops", "link_bandwidth_gbps"))
    peaks = _check_keys(doc, (*path, "peak_tflops"), v["peak_tflops"],
                        ("bf16", "fp16", "fp8", "fp4", "int8", "fp6", "bf16_fp16acc"))
    flops = {k: _number(doc, (*path, "peak_tflops", k), x, bounds=PEAK_TFLOPS) * 1e12
             for k, x in peaks.items() if x is not None}
    if "bf16" not in flops:
        raise doc.error((*path, "peak_tflops"), "expected at least a bf16 peak")
    ach = _check_keys(doc, (*path, "achievable"), v.get("achievable") or {},
                      ("bandwidth_fraction", "flops_fraction"))
    fr = {k: _number(doc, (*path, "achievable", k), x, bounds=FRACTION) for k, x in ach.items()}
    return GPU(
        key=key,
        name=str(v.get("name") or key),
        # memory_bytes: the exact capacity where known (NVIDIA's "80 GB" is 80 GiB), else GB.
        memory_bytes=(_number(doc, (*path, "memory_bytes"), v["memory_bytes"],
                              bounds=(MEMORY_GB[0] * 1e9, MEMORY_GB[1] * 1e9))
                      if "memory_bytes" in v
                      else _number(doc, (*path, "memory_gb"), v["memory_gb"], bounds=MEMORY_GB) * 1e9),
        hbm_bandwidth=_number(doc, (*path, "hbm_bandwidth_tbps"), v["hbm_bandwidth_tbps"],
                              bounds=BANDWIDTH_TBPS) * 1e12,
        peak_flops=flops,
        link_bandwidth=_number(doc, (*path, "link_bandwidth_gbps"), v["link_bandwidth_gbps"],
                               bounds=LINK_GBPS) * 1e9,
        link_latency=_number(doc, (*path, "link_latency_us"), v.get("link_latency_us", 0.0),
                             positive=False, bounds=LINK_LATENCY_US) * 1e-6,
        bandwidth_fraction=fr.get("bandwidth_fraction", 1.0),
        flops_fraction=fr.get("flops_fraction", 1.0),
        notes=(str(v["notes"]),) if v.get("notes") else (),
        kernels=_kernels(doc, (*path, "kernels"), v["kernels"]) if v.get("kernels") else None,
    )


def load_gpu(name: str, doc: Doc | None = None, path: KeyPath = ()) -> GPU:
    f = builtin_path("gpus", name, doc, path)
    return gpu_from_mapping(read_doc(f), (), read_doc(f).data, key=f.stem)


ENGINE_KEYS = ("name", "aliases", "version", "pass_overhead_us", "layer_overhead_us",
               "draft_pass_overhead_us", "verify_token_cost_us", "spec_cycle_overhead_us",
               "spec_step_overhead_us", "draft_pass_overhead_by_kind_us", "prefill_token_cost_us",
               "spec_sequence_cost_us", "sequence_cost_us", "base")


def engine_from_mapping(doc: Doc, path: KeyPath, value: Any, base: Engine | None = None) -> Engine:
    v = _check_keys(doc, path, value, ENGINE_KEYS)
    if base is None:
        for k in ("pass_overhead_us", "layer_overhead_us", "draft_pass_overhead_us",
                  "verify_token_cost_us"):
            if k not in v:
                raise doc.error(path, f"missing required key {k!r}")

    def us(k: str, default: float) -> float:
        if k not in v:
            return default
        return _number(doc, (*path, k), v[k], positive=False, bounds=OVERHEAD_US) * 1e-6

    b = base or Engine("", 0.0, 0.0, 0.0, 0.0)
    return Engine(
        name=str(v.get("name") or b.name),
        pass_overhead=us("pass_overhead_us", b.pass_overhead),
        layer_overhead=us("layer_overhead_us", b.layer_overhead),
        draft_pass_overhead=us("draft_pass_overhead_us", b.draft_pass_overhead),
        verify_token_cost=us("verify_token_cost_us", b.verify_token_cost),
        # spec_step_overhead_us: the key's earlier name, still read.
        spec_step_overhead=us("spec_cycle_overhead_us",
                              us("spec_step_overhead_us", b.spec_step_overhead)),
        spec_sequence_cost=us("spec_sequence_cost_us", b.spec_sequence_cost),
        sequence_cost=us("sequence_cost_us", b.sequence_cost),
        version=str(v.get("version") or b.version),
        source=doc.file,
        draft_pass_overhead_by_kind=_by_kind(doc, (*path, "draft_pass_overhead_by_kind_us"),
                                             v.get("draft_pass_overhead_by_kind_us"))
        if "draft_pass_overhead_by_kind_us" in v else b.draft_pass_overhead_by_kind,
        prefill_token_cost=us("prefill_token_cost_us", b.prefill_token_cost),
    )


def _by_kind(doc: Doc, path: KeyPath, value: Any) -> tuple[tuple[str, float], ...]:
    """``{drafter kind: microseconds}`` -> ``((kind, seconds), ...)``."""
    v = _check_keys(doc, path, value or {}, DRAFTER_KINDS)
    return tuple((k, _number(doc, (*path, k), x, positive=False) * 1e-6) for k, x in v.items())


def load_engine(name: str, doc: Doc | None = None, path: KeyPath = ()) -> Engine:
    f = builtin_path("engines", name, doc, path)
    d = read_doc(f)
    return engine_from_mapping(d, (), d.data)


MODEL_KEYS = ("name", "aliases", "dtypes", "hf_config", "config", "routing")
ROUTING_KEYS = ("coactivation", "decay", "loads", "source")


def routing_from_value(doc: Doc, path: KeyPath, value: Any, model: Model) -> Routing:
    """``routing: uniform`` (seed 000's coupon collector) or ``routing: {coactivation: F,
    decay: RATE | loads: [...] | [[...] per layer], source: ...}`` (seed 003)."""
    if value == "uniform":
        return UNIFORM
    if not isinstance(value, dict):
        raise doc.error(path, f"expected 'uniform' or a mapping with keys {', '.join(ROUTING_KEYS)}, "
                              f"got {value!r}")
    v = _check_keys(doc, path, value, ROUTING_KEYS)
    f = _number(doc, (*path, "coactivation"), v.get("coactivation", 0.0), positive=False, lo=0.0, hi=1.0)
    decay = _number(doc, (*path, "decay"), v.get("decay", 0.0), positive=False, lo=0.0, hi=1000.0)
    loads: tuple[tuple[float, ...], ...] = ()
    if "loads" in v:
        if "decay" in v:
            raise doc.error((*path, "loads"), "give either 'decay' or 'loads', not both")
        raw = v["loads"]
        rows = raw if isinstance(raw, list) and raw and isinstance(raw[0], list) else [raw]
        n_exp = {g.ffn.n_experts for g in model.layers if isinstance(g.ffn, MoE)}
        if not isinstance(raw, list) or not raw:
            raise doc.error((*path, "loads"), "expected a list of per-expert loads (or one list per layer)")
        parsed = []
        for i, row in enumerate(rows):
            rp = (*path, "loads", str(i)) if len(rows) > 1 else (*path, "loads")
            if not isinstance(row, list) or (n_exp and len(row) not in n_exp):
                raise doc.error(rp, f"expected a list of {', '.join(map(str, sorted(n_exp))) or 'E'} "
                                    "per-expert loads (tokens or shares)")
            vals = tuple(_number(doc, (*rp, str(j)), x, positive=False, lo=0.0) for j, x in enumerate(row))
            if sum(vals) <= 0:
                raise doc.error(rp, "expected loads that sum to more than 0")
            parsed.append(vals)
        loads = tuple(parsed)
    src = str(v.get("source") or "")
    return Routing(f, decay, loads, src)


def _dtypes(doc: Doc, path: KeyPath, value: Any) -> dict[str, str]:
    v = _check_keys(doc, path, value or {}, DTYPE_KEYS)
    for k, x in v.items():
        if x not in DTYPE_BYTES:
            raise doc.error((*path, k), f"expected a dtype ({', '.join(DTYPE_BYTES)}), got {x!r}")
    return dict(v)


def _read_config_json(doc: Doc, path: KeyPath, ref: str) -> dict[str, Any]:
    f = Path(ref)
    if not f.is_absolute():
        f = Path(doc.file).parent / f if doc.file not in ("<inline>", "<stdin>") else f
    if not f.exists():
        raise doc.error(path, f"config.json not found: {f}")
    problem = input_file_problem(str(f))
    if problem:
        raise doc.error(path, problem)
    data = json_document(read_input(str(f)), str(f))
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(f), 1)
    quant = f.parent / "hf_quant_config.json"  # NVIDIA ModelOpt checkpoints keep it beside
    if quant.is_file() and "hf_quant_config" not in data:
        data["hf_quant_config"] = json_document(read_input(str(quant)), str(quant))
    return data


def model_from_mapping(doc: Doc, path: KeyPath, value: Any, default_name: str = "") -> Model:
    v = _check_keys(doc, path, value, MODEL_KEYS)
    if "hf_config" in v:
        cfg = v["hf_config"]
        if not isinstance(cfg, dict):
            raise doc.error((*path, "hf_config"), "expected a mapping of config.json fields")
        cfg_path: KeyPath = (*path, "hf_config")
    elif "config" in v:
        cfg = _read_config_json(doc, (*path, "config"), _str(doc, (*path, "config"), v["config"]))
        cfg_path = (*path, "config")
    else:
        raise doc.error(path, "expected 'hf_config' (inline config.json fields) or 'config' "
                              "(path to a config.json)")
    dtypes = _dtypes(doc, (*path, "dtypes"), v.get("dtypes"))
    try:
        model = _warned(model_from_hf_config(cfg, str(v.get("name") or default_name), dtypes,
                                             doc.file))
    except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError) as exc:
        raise doc.error(cfg_path, str(exc)) from None
    if "routing" in v:
        model = replace(model, routing=routing_from_value(doc, (*path, "routing"), v["routing"], model))
    return model


def _warned(model: Model) -> Model:
    """Print the model's import warnings (fields priced approximately or not at all) on
    stderr, naming the field; never silent."""
    import sys

    for note in model.notes:
        print(f"spectune: warning: {model.source or model.name}: {note}", file=sys.stderr)
    return model


def load_model(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Model:
    """A built-in model by name, or a Hugging Face config.json by path."""
    if ref.endswith(".json") or ("/" in ref and Path(ref).exists()):
        d = doc or Doc(None, "<command line>")
        cfg = _read_config_json(d, path, ref)
        try:
            return _warned(model_from_hf_config(cfg, Path(ref).parent.name or ref, None, ref))
        except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError) as exc:
            raise InputError(str(exc), ref) from None
    f = builtin_path("models", ref, doc, path)
    d = read_doc(f)
    return model_from_mapping(d, (), d.data, f.stem)


DRAFTER_KEYS = ("name", "aliases", "kind", "target", "path", "dtypes", "hf_config", "config",
                "model", "cost_ratio", "prompt_lookup_min", "prompt_lookup_max", "topk",
                "num_draft_tokens")


def drafter_from_mapping(doc: Doc, path: KeyPath, value: Any, default_name: str = "") -> Drafter:
    v = _check_keys(doc, path, value, DRAFTER_KEYS, ("kind",))
    kind = v["kind"]
    if kind not in DRAFTER_KINDS:
        close = difflib.get_close_matches(str(kind), DRAFTER_KINDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise doc.error((*path, "kind"), f"expected one of {', '.join(DRAFTER_KINDS)}, "
                                         f"got {kind!r}{hint}")
    name = str(v.get("name") or default_name or kind)
    model = None
    if "hf_config" in v or "config" in v:
        sub = {k: v[k] for k in ("hf_config", "config", "dtypes") if k in v}
        model = model_from_mapping(doc, path, {**sub, "name": name}, name)
    elif "model" in v:
        m = v["model"]
        model = (load_model(m, doc, (*path, "model")) if isinstance(m, str)
                 else model_from_mapping(doc, (*path, "model"), m, name))
    cost_ratio = 0.0
    if kind == "cost_ratio":
        if "cost_ratio" not in v:
            raise doc.error(path, "a cost_ratio drafter needs 'cost_ratio' (draft token cost / step cost)")
        cost_ratio = _number(doc, (*path, "cost_ratio"), v["cost_ratio"], positive=False, bounds=COST_RATIO)
    if kind in ("draft_model", "eagle", "eagle3", "mtp") and model is None:
        raise doc.error(path, f"a {kind} drafter needs 'hf_config', 'config' or 'model'")
    if kind == "eagle" and model is not None:
        model = eagle_head(model)
    lo, hi, topk, n_draft = _drafting(doc, path, v, kind, model is not None)
    return Drafter(kind, name, model, cost_ratio, str(v.get("path") or ""), lo, hi, topk, n_draft)


def _drafting(doc: Doc, path: KeyPath, v: dict[str, Any], kind: str,
              has_model: bool) -> tuple[int, int, int, int]:
    """How the engine drafts: n-gram sizes (prompt_lookup_min, _max; one given sets both, as
    vLLM does) and a draft tree (topk, num_draft_tokens) of a model drafter."""
    lookup = {k: int(_number(doc, (*path, k), v[k], integer=True, lo=1, hi=64))
              for k in ("prompt_lookup_min", "prompt_lookup_max") if k in v}
    if lookup and kind != "ngram":
        raise doc.error((*path, next(iter(lookup))), "prompt_lookup_min/max belong to an ngram drafter")
    lo = lookup.get("prompt_lookup_min", lookup.get("prompt_lookup_max", 0))
    hi = lookup.get("prompt_lookup_max", lo)
    if lo > hi:
        raise doc.error((*path, "prompt_lookup_min"),
                        f"prompt_lookup_min = {lo} must be <= prompt_lookup_max = {hi}")
    tree = {k: int(_number(doc, (*path, k), v[k], integer=True, lo=lo_, hi=hi_))
            for k, lo_, hi_ in (("topk", 1, 16), ("num_draft_tokens", 2, 1024)) if k in v}
    if tree and not has_model:
        raise doc.error((*path, next(iter(tree))), "topk / num_draft_tokens describe a draft tree "
                                                   "of a model drafter (eagle, eagle3, mtp)")
    if "num_draft_tokens" in tree and tree.get("topk", 1) == 1:
        raise doc.error((*path, "num_draft_tokens"), "num_draft_tokens needs topk > 1 (a chain "
                                                     "verifies gamma + 1 tokens)")
    return lo, hi, tree.get("topk", 1), tree.get("num_draft_tokens", 0)


def load_drafter(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Drafter:
    if ref == "none":
        return Drafter("ngram", "ngram")
    f = builtin_path("drafters", ref, doc, path)
    d = read_doc(f)
    return drafter_from_mapping(d, (), d.data, f.stem)


# --------------------------------------------------------------------------- deployment
DEPLOYMENT_KEYS = ("name", "description", "gpu", "model", "drafter", "parallelism", "engine",
                   "workload", "acceptance", "gamma_max", "tie_tolerance", "achievable",
                   "routing", "slo", "calibration")
ACCEPTANCE_KEYS = ("alpha", "per_position", "marginal", "mean_length", "drafts", "source")


def acceptance_from_mapping(doc: Doc, path: KeyPath, value: Any) -> Acceptance:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Acceptance.iid(_number(doc, path, value, lo=0.0, hi=1.0), "stated alpha")
    v = _check_keys(doc, path, value, ACCEPTANCE_KEYS)
    given = [k for k in ("alpha", "per_position", "marginal", "mean_length") if k in v]
    if len(given) != 1:
        raise doc.error(path, "expected exactly one of alpha, per_position (conditional "
                              "a_1..a_K), marginal (accepted at position i / drafts) or "
                              f"mean_length (with drafts); got {given or 'none'}")
    src = str(v.get("source") or "")
    kind = given[0]
    if kind == "alpha":
        return Acceptance.iid(_number(doc, (*path, "alpha"), v["alpha"], positive=False,
                                      lo=0.0, hi=1.0), src or "stated alpha")
    if kind in ("per_position", "marginal"):
        seq = v[kind]
        if not isinstance(seq, list) or not seq:
            raise doc.error((*path, kind), f"expected a non-empty list of rates in [0, 1], got {short(seq)}")
        if len(seq) > MAX_POSITIONS:
            raise doc.error((*path, kind), f"{len(seq)} positions; at most {MAX_POSITIONS}")
        rates = [_number(doc, (*path, kind, str(i)), x, positive=False, lo=0.0, hi=1.0)
                 for i, x in enumerate(seq)]
        if kind == "marginal":
            if any(b > a + 1e-9 for a, b in itertools.pairwise(rates)):
                raise doc.error((*path, kind), "marginal acceptance must not increase with position")
            return Acceptance.from_marginal(rates, src or "stated per-position (marginal)")
        return Acceptance(tuple(rates), src or "stated per-position (conditional)")
    if "drafts" not in v:
        raise doc.error(path, "mean_length needs 'drafts': the number of draft tokens it was measured with")
    k = int(_number(doc, (*path, "drafts"), v["drafts"], integer=True, lo=1, hi=MAX_GAMMA))
    tau = _number(doc, (*path, "mean_length"), v["mean_length"], lo=1.0, hi=k + 1.0)
    return Acceptance.from_mean_length(tau, k, src or "stated mean acceptance length")


def _resolve(doc: Doc, path: KeyPath, value: Any, loader: Callable[..., Any],
             from_mapping: Callable[..., Any]) -> Any:
    if isinstance(value, str):
        return loader(value, doc, path)
    if isinstance(value, dict):
        return from_mapping(doc, path, value)
    raise doc.error(path, f"expected a built-in name or a mapping, got {short(value)}")


def deployment_from_doc(doc: Doc) -> Deployment:
    v = _check_keys(doc, (), doc.data, DEPLOYMENT_KEYS, ("gpu", "model", "drafter", "workload"))
    gpu: GPU = _resolve(doc, ("gpu",), v["gpu"], load_gpu, gpu_from_mapping)
    if "achievable" in v:
        ach = _check_keys(doc, ("achievable",), v["achievable"], ("bandwidth_fraction", "flops_fraction"))
        fractions = {k: _number(doc, ("achievable", k), x, bounds=FRACTION) for k, x in ach.items()}
        # Overridden fractions replace the measured kernel efficiencies too (default_kernels).
        gpu = replace(gpu, bandwidth_fraction=fractions.get("bandwidth_fraction", gpu.bandwidth_fraction),
                      flops_fraction=fractions.get("flops_fraction", gpu.flops_fraction), kernels=None)
    model: Model = _resolve(doc, ("model",), v["model"], load_model, model_from_mapping)
    if "routing" in v:
        model = replace(model, routing=routing_from_value(doc, ("routing",), v["routing"], model))
    drafter: Drafter = _resolve(doc, ("drafter",), v["drafter"], load_drafter, drafter_from_mapping)

    par_v = _check_keys(doc, ("parallelism",), v.get("parallelism") or {}, ("tp", "ep", "dp"))
    nums = {k: int(_number(doc, ("parallelism", k), x, integer=True, lo=1, hi=MAX_GPUS))
            for k, x in par_v.items()}
    try:
        par = Parallelism(**nums)
    except ValueError as exc:
        raise doc.error(("parallelism",), str(exc)) from None
    problem = parallelism_problem(model, par)
    if problem:
        raise doc.error(("parallelism", problem[:2]), problem)

    eng_v = v.get("engine", "vllm")
    if isinstance(eng_v, dict) and "base" in eng_v:
        base = load_engine(_str(doc, ("engine", "base"), eng_v["base"]), doc, ("engine", "base"))
        engine = engine_from_mapping(doc, ("engine",), eng_v, base)
    else:
        engine = _resolve(doc, ("engine",), eng_v, load_engine, engine_from_mapping)
    if drafter.topk > 1 and engine.name.lower().startswith("vllm"):
        raise doc.error(("drafter",), f"a draft tree (topk = {drafter.topk}) runs on SGLang, not "
                                      "vLLM (vLLM drafts chains only): set engine: sglang, or "
                                      "topk 1")

    wl = _check_keys(doc, ("workload",), v["workload"], ("batch_sizes", "context_lengths"),
                     ("batch_sizes", "context_lengths"))
    batches = _int_list(doc, ("workload", "batch_sizes"), wl["batch_sizes"], MAX_BATCH)
    contexts = _int_list(doc, ("workload", "context_lengths"), wl["context_lengths"], MAX_CONTEXT)
    problem = workload_problem(batches, contexts)
    if problem:
        raise doc.error(("workload",), problem)
    workload = Workload(batches, contexts)
    if "acceptance" not in v and drafter.kind != "ngram":
        raise doc.error((), "missing required key 'acceptance' (alpha, per_position, marginal "
                            "or mean_length), or pass --observed / --metrics-url")
    acceptance = acceptance_from_mapping(doc, ("acceptance",), v.get("acceptance", 0.5))
    gamma_max = int(_number(doc, ("gamma_max",), v.get("gamma_max", DEFAULT_GAMMA_MAX), integer=True,
                            lo=1, hi=MAX_GAMMA))
    tol = _number(doc, ("tie_tolerance",), v.get("tie_tolerance", DEFAULT_TIE_TOLERANCE), positive=False,
                  lo=0, hi=MAX_TIE_TOLERANCE)
    name = str(v.get("name") or Path(doc.file).stem)
    slo = None
    if "slo" in v:
        s = _check_keys(doc, ("slo",), v["slo"], ("tpot_ms",), ("tpot_ms",))
        slo = _number(doc, ("slo", "tpot_ms"), s["tpot_ms"], hi=1e6) * 1e-3
    dep = Deployment(name, gpu, model, drafter, par, engine, workload, acceptance, gamma_max, tol,
                     tpot_slo=slo)
    if "calibration" in v:
        from spectune.calibration import apply_calibration, load_calibration

        ref = Path(_str(doc, ("calibration",), v["calibration"]))
        if not ref.is_absolute() and doc.file not in ("<inline>", "<stdin>"):
            ref = Path(doc.file).parent / ref
        if not ref.is_file():
            raise doc.error(("calibration",), f"calibration file not found: {ref}")
        dep = apply_calibration(dep, load_calibration(ref))
    return dep


def load_deployment(ref: str) -> Deployment:
    """A deployment profile from a YAML file, ``-`` (stdin), or a shipped example's name."""
    if ref == "-":
        return deployment_from_doc(parse_yaml(read_input("-"), "<stdin>"))
    p = Path(ref)
    if not p.exists() and (not ref.endswith((".yaml", ".yml")) or p.parent.name == "examples"):
        # A shipped example by name, or by its path in the repository (`examples/x.yaml`,
        # as the documentation writes it) when run outside a clone.
        ex = examples_dir() / (p.name if p.suffix in (".yaml", ".yml") else f"{ref}.yaml")
        if ex.is_file():
            p = ex
    return deployment_from_doc(read_doc(p))


def examples_dir() -> Path:
    """Shipped example deployments: inside the installed package, or the repo's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_examples", here.parent / "examples"):
        if candidate.is_dir():
            return candidate
    return here.parent / "examples"


def describe_builtin(kind: str, name: str) -> tuple[Path, Mapping[str, Any]]:
    f = builtin_path(kind, name)
    return f, read_doc(f).data


def example_names() -> list[str]:
    return sorted(f.stem for f in examples_dir().glob("*.yaml"))


def example_path(name: str) -> Path:
    """A shipped example deployment by name (``llama-3.1-70b-h100-eagle3``)."""
    base = Path(name).name
    f = examples_dir() / (base if base.endswith((".yaml", ".yml")) else f"{base}.yaml")
    if not f.is_file():
        close = difflib.get_close_matches(name, example_names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"no shipped example named {name!r}{hint} (see: spectune profiles list examples)")
    return f


def docs_dir() -> Path:
    """Documents spectune refers to (schema, check, validation): in the package or the repo."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_docs", here.parent / "docs"):
        if candidate.is_dir():
            return candidate
    raise InputError("the documents are missing from this installation (reinstall spectune)")


def doc_names() -> list[str]:
    return sorted(f.stem for f in docs_dir().glob("*.md"))


def doc_path(name: str) -> Path:
    base = Path(name).name
    f = docs_dir() / (base if base.endswith(".md") else f"{base}.md")
    if not f.is_file():
        raise InputError(f"no document named {name!r}; shipped: {', '.join(doc_names())}")
    return f


def builtin_sources(dep: Deployment) -> list[tuple[str, str]]:
    """(title, shipped YAML with its source comments) of each built-in profile ``dep`` uses;
    inline (custom) parts have none."""
    wanted = (("gpus", dep.gpu.key), ("models", dep.model.name), ("drafters", dep.drafter.name),
              ("engines", dep.engine.name))
    out = []
    for kind, name in wanted:
        try:
            f = builtin_path(kind, name)
        except InputError:
            continue
        out.append((f"{kind[:-1]} profile {f.stem} (spectune profiles show {f.stem})",
                    f.read_text(encoding="utf-8")))
    return out
