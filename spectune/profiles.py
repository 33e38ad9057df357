"""Loading deployment profiles and built-in GPU / model / drafter / engine profiles.

Every error names the file, the line, the key path and what was expected; unknown keys
are refused with the closest known key suggested. Built-ins live in ``profiles/``
(installed inside the package as ``spectune/_profiles``); a user refers to them by file
name or alias.
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from spectune.acceptance import Acceptance
from spectune.deployment import Deployment, Engine, Parallelism, Workload
from spectune.errors import InputError
from spectune.hardware import DTYPE_BYTES, GPU
from spectune.hf_config import DTYPE_KEYS, model_from_hf_config
from spectune.limits import MAX_BATCH, MAX_CONTEXT, MAX_GPUS
from spectune.model import DRAFTER_KINDS, Drafter, Model

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
    """Parse YAML text, keeping the line of each key. Syntax errors become InputError."""
    import yaml

    # libyaml's C parser when the wheel has it: 5-10x faster on large config.json blocks.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"not valid YAML: {problem}", file, mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return Doc(data, file, lines)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path``; InputError (exit 2) naming ``path`` as given when it is
    missing or unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


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
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
            raise doc.error((*path, key), f"unknown key {key!r}{hint}")
    for key in required:
        if key not in value:
            raise doc.error(path, f"missing required key {key!r}")
    return value


def _number(doc: Doc, path: KeyPath, value: Any, *, positive: bool = True, integer: bool = False,
            lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise doc.error(path, f"expected a {'whole ' if integer else ''}number, got {value!r}")
    if integer and int(value) != value:
        raise doc.error(path, f"expected a whole number, got {value!r}")
    if positive and value <= 0:
        raise doc.error(path, f"expected a number > 0, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise doc.error(path, f"expected a number in [{lo}, {hi}], got {value!r}")
    return float(value)


def _int_list(doc: Doc, path: KeyPath, value: Any, hi: float) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise doc.error(path, f"expected a non-empty list of whole numbers, got {value!r}")
    return tuple(int(_number(doc, (*path, str(i)), v, integer=True, lo=1, hi=hi))
                 for i, v in enumerate(value))


def _str(doc: Doc, path: KeyPath, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise doc.error(path, f"expected a non-empty string, got {value!r}")
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


GPU_KEYS = ("name", "aliases", "memory_gb", "hbm_bandwidth_tbps", "peak_tflops",
            "link_bandwidth_gbps", "link_latency_us", "achievable", "confidence", "notes")


def gpu_from_mapping(doc: Doc, path: KeyPath, value: Any, key: str = "custom") -> GPU:
    v = _check_keys(doc, path, value, GPU_KEYS,
                    ("memory_gb", "hbm_bandwidth_tbps", "peak_tflops", "link_bandwidth_gbps"))
    peaks = _check_keys(doc, (*path, "peak_tflops"), v["peak_tflops"],
                        ("bf16", "fp16", "fp8", "fp4", "int8", "fp6", "bf16_fp16acc"))
    flops = {k: _number(doc, (*path, "peak_tflops", k), x) * 1e12
             for k, x in peaks.items() if x is not None}
    if "bf16" not in flops:
        raise doc.error((*path, "peak_tflops"), "expected at least a bf16 peak")
    ach = _check_keys(doc, (*path, "achievable"), v.get("achievable") or {},
                      ("bandwidth_fraction", "flops_fraction"))
    fr = {k: _number(doc, (*path, "achievable", k), x, lo=0.01, hi=1.0) for k, x in ach.items()}
    return GPU(
        key=key,
        name=str(v.get("name") or key),
        memory_bytes=_number(doc, (*path, "memory_gb"), v["memory_gb"]) * 1e9,
        hbm_bandwidth=_number(doc, (*path, "hbm_bandwidth_tbps"), v["hbm_bandwidth_tbps"]) * 1e12,
        peak_flops=flops,
        link_bandwidth=_number(doc, (*path, "link_bandwidth_gbps"), v["link_bandwidth_gbps"]) * 1e9,
        link_latency=_number(doc, (*path, "link_latency_us"), v.get("link_latency_us", 0.0),
                             positive=False) * 1e-6,
        bandwidth_fraction=fr.get("bandwidth_fraction", 1.0),
        flops_fraction=fr.get("flops_fraction", 1.0),
        notes=(str(v["notes"]),) if v.get("notes") else (),
    )


def load_gpu(name: str, doc: Doc | None = None, path: KeyPath = ()) -> GPU:
    f = builtin_path("gpus", name, doc, path)
    return gpu_from_mapping(read_doc(f), (), read_doc(f).data, key=f.stem)


ENGINE_KEYS = ("name", "aliases", "version", "pass_overhead_us", "layer_overhead_us",
               "draft_pass_overhead_us", "verify_token_cost_us", "spec_step_overhead_us",
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
        return _number(doc, (*path, k), v[k], positive=False) * 1e-6

    b = base or Engine("", 0.0, 0.0, 0.0, 0.0)
    return Engine(
        name=str(v.get("name") or b.name),
        pass_overhead=us("pass_overhead_us", b.pass_overhead),
        layer_overhead=us("layer_overhead_us", b.layer_overhead),
        draft_pass_overhead=us("draft_pass_overhead_us", b.draft_pass_overhead),
        verify_token_cost=us("verify_token_cost_us", b.verify_token_cost),
        spec_step_overhead=us("spec_step_overhead_us", b.spec_step_overhead),
        spec_sequence_cost=us("spec_sequence_cost_us", b.spec_sequence_cost),
        sequence_cost=us("sequence_cost_us", b.sequence_cost),
        version=str(v.get("version") or b.version),
        source=doc.file,
    )


def load_engine(name: str, doc: Doc | None = None, path: KeyPath = ()) -> Engine:
    f = builtin_path("engines", name, doc, path)
    d = read_doc(f)
    return engine_from_mapping(d, (), d.data)


MODEL_KEYS = ("name", "aliases", "dtypes", "hf_config", "config")


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
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise doc.error(path, f"config.json not found: {f}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", str(f), exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(f), 1)
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
        return model_from_hf_config(cfg, str(v.get("name") or default_name), dtypes, doc.file)
    except (ValueError, TypeError, KeyError) as exc:
        raise doc.error(cfg_path, str(exc)) from None


def load_model(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Model:
    """A built-in model by name, or a Hugging Face config.json by path."""
    if ref.endswith(".json") or ("/" in ref and Path(ref).exists()):
        d = doc or Doc(None, "<command line>")
        cfg = _read_config_json(d, path, ref)
        try:
            return model_from_hf_config(cfg, Path(ref).parent.name or ref, None, ref)
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(str(exc), ref) from None
    f = builtin_path("models", ref, doc, path)
    d = read_doc(f)
    return model_from_mapping(d, (), d.data, f.stem)


DRAFTER_KEYS = ("name", "aliases", "kind", "target", "path", "dtypes", "hf_config", "config",
                "model", "cost_ratio")


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
        cost_ratio = _number(doc, (*path, "cost_ratio"), v["cost_ratio"], positive=False)
    if kind in ("draft_model", "eagle", "eagle3", "mtp") and model is None:
        raise doc.error(path, f"a {kind} drafter needs 'hf_config', 'config' or 'model'")
    return Drafter(kind, name, model, cost_ratio, str(v.get("path") or ""))


def load_drafter(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Drafter:
    if ref in ("ngram", "none"):
        return Drafter("ngram", "ngram")
    f = builtin_path("drafters", ref, doc, path)
    d = read_doc(f)
    return drafter_from_mapping(d, (), d.data, f.stem)


# --------------------------------------------------------------------------- deployment
DEPLOYMENT_KEYS = ("name", "description", "gpu", "model", "drafter", "parallelism", "engine",
                   "workload", "acceptance", "gamma_max", "tie_tolerance", "achievable", "calibration")
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
            raise doc.error((*path, kind), f"expected a non-empty list of rates in [0, 1], got {seq!r}")
        rates = [_number(doc, (*path, kind, str(i)), x, positive=False, lo=0.0, hi=1.0)
                 for i, x in enumerate(seq)]
        if kind == "marginal":
            if any(b > a + 1e-9 for a, b in itertools.pairwise(rates)):
                raise doc.error((*path, kind), "marginal acceptance must not increase with position")
            return Acceptance.from_marginal(rates, src or "stated per-position (marginal)")
        return Acceptance(tuple(rates), src or "stated per-position (conditional)")
    if "drafts" not in v:
        raise doc.error(path, "mean_length needs 'drafts': the number of draft tokens it was measured with")
    k = int(_number(doc, (*path, "drafts"), v["drafts"], integer=True))
    tau = _number(doc, (*path, "mean_length"), v["mean_length"], lo=1.0, hi=k + 1.0)
    return Acceptance.from_mean_length(tau, k, src or "stated mean acceptance length")


def _resolve(doc: Doc, path: KeyPath, value: Any, loader: Callable[..., Any],
             from_mapping: Callable[..., Any]) -> Any:
    if isinstance(value, str):
        return loader(value, doc, path)
    if isinstance(value, dict):
        return from_mapping(doc, path, value)
    raise doc.error(path, f"expected a built-in name or a mapping, got {value!r}")


def deployment_from_doc(doc: Doc) -> Deployment:
    v = _check_keys(doc, (), doc.data, DEPLOYMENT_KEYS, ("gpu", "model", "drafter", "workload"))
    gpu: GPU = _resolve(doc, ("gpu",), v["gpu"], load_gpu, gpu_from_mapping)
    if "achievable" in v:
        ach = _check_keys(doc, ("achievable",), v["achievable"], ("bandwidth_fraction", "flops_fraction"))
        fractions = {k: _number(doc, ("achievable", k), x, lo=0.01, hi=1.0) for k, x in ach.items()}
        gpu = replace(gpu, bandwidth_fraction=fractions.get("bandwidth_fraction", gpu.bandwidth_fraction),
                      flops_fraction=fractions.get("flops_fraction", gpu.flops_fraction))
    model: Model = _resolve(doc, ("model",), v["model"], load_model, model_from_mapping)
    drafter: Drafter = _resolve(doc, ("drafter",), v["drafter"], load_drafter, drafter_from_mapping)

    par_v = _check_keys(doc, ("parallelism",), v.get("parallelism") or {}, ("tp", "ep", "dp"))
    nums = {k: int(_number(doc, ("parallelism", k), x, integer=True, lo=1, hi=MAX_GPUS))
            for k, x in par_v.items()}
    try:
        par = Parallelism(**nums)
    except ValueError as exc:
        raise doc.error(("parallelism",), str(exc)) from None

    eng_v = v.get("engine", "vllm")
    if isinstance(eng_v, dict) and "base" in eng_v:
        base = load_engine(_str(doc, ("engine", "base"), eng_v["base"]), doc, ("engine", "base"))
        engine = engine_from_mapping(doc, ("engine",), eng_v, base)
    else:
        engine = _resolve(doc, ("engine",), eng_v, load_engine, engine_from_mapping)

    wl = _check_keys(doc, ("workload",), v["workload"], ("batch_sizes", "context_lengths"),
                     ("batch_sizes", "context_lengths"))
    workload = Workload(_int_list(doc, ("workload", "batch_sizes"), wl["batch_sizes"], MAX_BATCH),
                        _int_list(doc, ("workload", "context_lengths"), wl["context_lengths"], MAX_CONTEXT))
    if "acceptance" not in v and drafter.kind != "ngram":
        raise doc.error((), "missing required key 'acceptance' (alpha, per_position, marginal "
                            "or mean_length), or pass --observed / --metrics-url")
    acceptance = acceptance_from_mapping(doc, ("acceptance",), v.get("acceptance", 0.5))
    gamma_max = int(_number(doc, ("gamma_max",), v.get("gamma_max", 8), integer=True, lo=1, hi=64))
    tol = _number(doc, ("tie_tolerance",), v.get("tie_tolerance", 0.01), positive=False, lo=0, hi=0.5)
    name = str(v.get("name") or Path(doc.file).stem)
    dep = Deployment(name, gpu, model, drafter, par, engine, workload, acceptance, gamma_max, tol)
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
    import sys

    if ref == "-":
        return deployment_from_doc(parse_yaml(sys.stdin.read(), "<stdin>"))
    p = Path(ref)
    if not p.exists() and not ref.endswith((".yaml", ".yml")):
        ex = examples_dir() / f"{ref}.yaml"
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
