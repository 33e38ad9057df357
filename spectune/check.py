"""``spectune check``: is a deployed serving configuration's speculation what the profile
recommends?

Reads the configuration as deployed -- a ``vllm serve --config`` YAML file, a vLLM or
SGLang command line (a text file or shell script), or a Kubernetes manifest whose
container command/args hold one -- extracts the configured speculation and predicts the
throughput speedup at every operating point of the profile with it, without it and at the
recommendation. The gate passes when the configuration is within ``tolerance`` of the
recommendation's speedup at every point and speculation slows no point down.

How each engine reads its configuration is taken from its own source (see
:mod:`spectune.emit.vllm` and :mod:`spectune.emit.sglang` for the citations): vLLM's
schedule semantics (gaps inherit the previous K, the tail the last K, all clamped to
``num_speculative_tokens``; ignored when ``data_parallel_size > 1``), its method
inference from the draft model's name, ``-sc`` / dotted ``--speculative-config.KEY``
forms and ``--spec-method`` / ``--spec-model`` / ``--spec-tokens``; SGLang's triple,
NEXTN = EAGLE, and its adaptive config (largest key <= batch size, one slot's initial
steps = ``--speculative-num-steps`` when it is a candidate, else the middle candidate).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from spectune.deployment import Deployment
from spectune.emit.plan import Range, lookup, per_batch_gamma
from spectune.envelope import Document, envelope
from spectune.errors import EXIT_GATE_FAILED, EXIT_OK, InputError
from spectune.inputs import input_file_problem, json_document, read_input, short, yaml_documents
from spectune.limits import DEFAULT_CHECK_TOLERANCE, MAX_GAMMA, MAX_GPUS
from spectune.profiles import read_text
from spectune.recommend import Recommendation, recommend
from spectune.tree import verify_width
from spectune.version import __version__

DEFAULT_TOLERANCE = DEFAULT_CHECK_TOLERANCE
GAMMA_LIMIT = MAX_GAMMA  # largest draft length evaluated (as `recommend --gamma-max` and profiles' gamma_max)

# SGLang's DEFAULT_ADAPTIVE_CONFIG (python/sglang/srt/speculative/adaptive_spec_params.py,
# sglang 0.5.23): used when --speculative-adaptive is given without a config file.
SGLANG_DEFAULT_ADAPTIVE = {"1": [1, 3, 5, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]}

# vLLM's deprecated MTP method names, all mapped to "mtp" (vllm/config/speculative.py).
_VLLM_MTP_ALIASES = ("deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp",
                     "longcat_flash_mtp", "pangu_ultra_moe_mtp")


@dataclass
class Configured:
    """The speculation a serving configuration sets up, as the engine would read it."""

    engine: str  # "vllm" or "sglang"
    form: str  # "vllm-config-file", "command-line" or "kubernetes"
    file: str
    line: int | None = None
    method: str | None = None  # the engine's own name; None = speculation off
    model: str | None = None  # drafter weights as configured
    gamma: int = 0  # vLLM num_speculative_tokens / SGLang draft steps
    schedule: list[Range] | None = None  # per-batch-size ranges, as configured
    schedule_active: bool = False  # False when the engine ignores the schedule
    data_parallel: int = 1
    prompt_lookup: tuple[int | None, int | None] = (None, None)  # vLLM ngram (min, max)
    sglang: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    served_model: str | None = None  # the target model as configured (HF id or path); None: not stated
    tensor_parallel: int = 1
    expert_parallel: bool = False  # vLLM --enable-expert-parallel / SGLang --ep-size > 1

    @property
    def speculate(self) -> bool:
        return self.method is not None and (self.gamma > 0 or self.schedule_active)

    def gamma_at(self, batch: int) -> int:
        """Draft length the engine runs at ``batch`` concurrent sequences."""
        if not self.speculate:
            return 0
        if self.schedule and self.schedule_active:
            return lookup(self.schedule, batch, self.gamma if self.engine == "vllm" else None)
        return self.gamma

    def max_gamma(self, batches: Sequence[int]) -> int:
        return max((self.gamma_at(int(b)) for b in batches), default=0)


# --------------------------------------------------------------------------- reading files
def read_serving_config(path: str) -> Configured:
    """Parse a serving configuration file; InputError (exit 2) names the file and line."""
    p = Path(path)
    text = read_text(path)
    if p.suffix.lower() in (".yaml", ".yml", ".json"):
        return _from_yaml(text, path)
    return _from_shell(text, path, p.parent)


def _yaml_docs(text: str, file: str) -> list[tuple[Any, yaml.Node]]:
    """The non-empty documents of a YAML stream, through the bounded loader."""
    return yaml_documents(text, file)


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                return v
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _line(node: yaml.Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None


def _from_yaml(text: str, file: str) -> Configured:
    docs = _yaml_docs(text, file)
    if not docs:
        raise InputError("empty file: expected a `vllm serve --config` YAML file or a Kubernetes "
                         "manifest", file, 1)
    if any(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d, _ in docs):
        return _from_kubernetes(docs, file)
    if len(docs) > 1 or not isinstance(docs[0][0], dict):
        raise InputError("expected a `vllm serve --config` YAML mapping (option: value) or a "
                         "Kubernetes manifest (apiVersion, kind)", file, _line(docs[0][1]))
    data, node = docs[0]
    conf = Configured("vllm", "vllm-config-file", file, 1)
    _vllm_apply(conf, _vllm_file_options(data, file, node), [], file)
    return conf


# --------------------------------------------------------------------------- shell text
_OPERATORS = {";", "&", "&&", "|", "||", "\n", "(", ")", ";;", "|&"}
_REDIRECTS = {"<", ">", ">>", "<<", "<>", ">&", "<&", "&>", ">|", "&>>"}


@dataclass
class _Command:
    engine: str
    args: list[str]
    line: int


def _scan_shell(text: str) -> tuple[list[tuple[int, int]], int]:
    """One pass over shell quoting: the comment spans ``(start, end)`` -- ``#`` starting a
    word, outside quotes, up to the end of its line -- and the offset of the last quote
    opened (0 when none). A backslash escapes the next character outside quotes and inside
    double quotes."""
    comments: list[tuple[int, int]] = []
    quote = None
    last_quote = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote is None:
            if c == "\\":
                i += 2
                continue
            if c == "#" and (i == 0 or text[i - 1] in " \t\n;&|("):
                nl = text.find("\n", i)
                end = len(text) if nl < 0 else nl
                comments.append((i, end))
                i = end
                continue
            if c in "'\"":
                quote, last_quote = c, i
        elif c == quote:
            quote = None
        elif c == "\\" and quote == '"':
            i += 1
        i += 1
    return comments, last_quote


def _unclosed_quote_line(text: str) -> int:
    """Line of the last quote opened in ``text`` (1 when none): where shlex's "No closing
    quotation" comes from."""
    return text.count("\n", 0, _scan_shell(text)[1]) + 1


def _strip_comments(text: str) -> str:
    """Blank out shell comments (``#`` starting a word, outside quotes) keeping every offset
    and newline, so that a comment still ends its command."""
    out = list(text)
    for start, end in _scan_shell(text)[0]:
        out[start:end] = " " * (end - start)
    return "".join(out)


def _shell_commands(text: str, file: str) -> Iterator[tuple[list[str], int]]:
    """Simple commands of a shell text (words, line of the first word); line continuations
    joined, quotes handled by :mod:`shlex`, comments dropped, operators split commands."""
    flat = text.replace("\\\r\n", "   ").replace("\\\n", "  ")  # same length: offsets = lines
    lex = shlex.shlex(_strip_comments(flat), posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace = " \t\r"
    lex.commenters = ""
    lex.whitespace_split = False
    words: list[str] = []
    first_line = 1
    skip_next = False
    try:
        while True:
            tok = lex.get_token()
            if tok is None or tok == lex.eof:
                break
            stream = lex.instream
            pos = stream.tell() if hasattr(stream, "tell") else 0
            line = text.count("\n", 0, max(0, pos - 1)) + 1
            if tok in _OPERATORS:
                if words:
                    yield words, first_line
                words = []
                continue
            if tok in _REDIRECTS:
                if words and words[-1].isdigit():
                    words.pop()
                skip_next = True
                continue
            if skip_next:
                skip_next = False
                continue
            if not words:
                first_line = line - tok.count("\n")
            words.append(tok)
    except ValueError as exc:
        raise InputError(f"cannot parse the shell text: {exc}", file, _unclosed_quote_line(text)) from None
    if words:
        yield words, first_line


def _engine_command(words: list[str]) -> tuple[str, list[str]] | None:
    """(engine, arguments) when ``words`` launch vLLM or SGLang, else None."""
    for i, w in enumerate(words):
        base = w.rsplit("/", 1)[-1]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if base == "vllm" and nxt == "serve":
            return "vllm", words[i + 2:]
        if base == "sglang" and nxt == "serve":
            return "sglang", words[i + 2:]
        if base.startswith("python") and nxt == "-m" and i + 2 < len(words):
            mod = words[i + 2]
            if mod.startswith("vllm.entrypoints"):
                return "vllm", words[i + 3:]
            if mod in ("sglang.launch_server", "sglang.srt.server"):
                return "sglang", words[i + 3:]
    return None


def _is_shell_c(word: str, flag: str) -> bool:
    """``sh -c`` / ``bash -lc``: the next word is a script."""
    return word.rsplit("/", 1)[-1] in ("sh", "bash", "dash", "zsh") and bool(re.fullmatch(r"-\w*c\w*", flag))


def _find_commands(text: str, file: str, base_line: int = 0) -> list[_Command]:
    out = []
    for words, line in _shell_commands(text, file):
        found = _engine_command(words)
        if found:
            out.append(_Command(found[0], found[1], base_line + line))
            continue
        # sh -c '...' / bash -lc "..." nest a script
        for i, w in enumerate(words[:-1]):
            if _is_shell_c(w, words[i + 1]):
                if i + 2 < len(words):
                    out += _find_commands(words[i + 2], file, base_line + line - 1)
                break
    return out


def _from_shell(text: str, file: str, folder: Path) -> Configured:
    cmds = _find_commands(text, file)
    if not cmds:
        raise InputError("no vLLM or SGLang command found (expected `vllm serve ...`, `python -m "
                         "vllm.entrypoints.openai.api_server ...` or `python -m sglang.launch_server "
                         "...`)", file)
    conf = _from_command(cmds[0], "command-line", file, folder)
    if len(cmds) > 1:
        conf.warnings.append(f"{len(cmds)} engine commands found; checked the first (line {cmds[0].line})")
    return conf


def _from_command(cmd: _Command, form: str, file: str, folder: Path) -> Configured:
    conf = Configured(cmd.engine, form, file, cmd.line)
    if cmd.engine == "vllm":
        _vllm_from_args(conf, cmd.args, folder)
    else:
        _sglang_from_args(conf, cmd.args, folder)
    return conf


# --------------------------------------------------------------------------- Kubernetes
def _containers(data: Any, node: yaml.Node | None) -> Iterator[tuple[dict[str, Any], yaml.Node | None]]:
    """Every container of a manifest (Deployment, StatefulSet, Pod, Job, LeaderWorkerSet, List...)."""
    if isinstance(data, dict):
        for key, value in data.items():
            sub = _child(node, key)
            if key in ("containers", "initContainers") and isinstance(value, list):
                if key == "containers":
                    for i, c in enumerate(value):
                        if isinstance(c, dict):
                            yield c, _child(sub, i)
                continue
            yield from _containers(value, sub)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from _containers(item, _child(node, i))


def _expand_env(words: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion in command/args from literal env values."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), w)
            for w in words]


def _from_kubernetes(docs: list[tuple[Any, yaml.Node]], file: str) -> Configured:
    found: list[tuple[_Command, str]] = []
    for data, node in docs:
        for c, cnode in _containers(data, node):
            name = str(c.get("name") or "?")
            for key in ("command", "args", "env"):
                if c.get(key) is not None and not isinstance(c[key], list):
                    raise InputError(f"container {name!r}: {key} must be a list, got "
                                     f"{type(c[key]).__name__}", file, _line(_child(cnode, key)), key)
            for key in ("command", "args"):
                bad = [x for x in c.get(key) or [] if isinstance(x, (dict, list))]
                if bad:
                    raise InputError(f"container {name!r}: {key} must be a list of strings", file,
                                     _line(_child(cnode, key)), key)
            command = [str(x) for x in (c.get("command") or [])]
            args = [str(x) for x in (c.get("args") or [])]
            env = {str(e["name"]): str(e["value"]) for e in (c.get("env") or [])
                   if isinstance(e, dict) and "name" in e and "value" in e}
            words = _expand_env(command + args, env)
            where = _child(cnode, "args") or _child(cnode, "command") or cnode
            line = _line(where) or 1
            if not command and "vllm" in str(c.get("image", "")):  # image entrypoint: vllm serve
                found.append((_Command("vllm", words, line), name))
                continue
            hit = _engine_command(words)
            if hit:
                found.append((_Command(hit[0], hit[1], line), name))
                continue
            for i, w in enumerate(words[:-1]):
                if _is_shell_c(w, words[i + 1]):
                    if i + 2 < len(words):
                        k = i + 2
                        item = (_child(_child(cnode, "command"), k) if k < len(command)
                                else _child(_child(cnode, "args"), k - len(command)))
                        base = line
                        if isinstance(item, yaml.ScalarNode):  # block scalar text starts a line below
                            base = item.start_mark.line + (1 if item.style in ("|", ">") else 0)
                        found += [(cmd, name) for cmd in _find_commands(words[k], file, base)]
                    break
    if not found:
        raise InputError("no container of this Kubernetes manifest runs vLLM or SGLang (looked for "
                         "`vllm serve`, `python -m vllm.entrypoints...`, `python -m "
                         "sglang.launch_server` in command/args, or args for a vllm image)", file)
    cmd, name = found[0]
    conf = _from_command(cmd, "kubernetes", file, Path(file).parent)
    if len(found) > 1:
        conf.warnings.insert(0, f"{len(found)} engine containers found; checked {name!r} (line {cmd.line})")
    return conf


# --------------------------------------------------------------------------- vLLM
def _norm_opt(opt: str) -> str:
    """vLLM's FlexibleArgumentParser: underscores and dashes are the same in option names."""
    head, dot, rest = opt.partition(".")
    return head.replace("_", "-") + dot + rest


def _split_options(args: list[str]) -> Iterator[tuple[str | None, str | None]]:
    """(option, value) pairs; (None, word) for a positional; value None for a flag."""
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", a):
            if "=" in a and a.startswith("--"):
                opt, val = a.split("=", 1)
                yield opt, val
                i += 1
                continue
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and not (nxt.startswith("-") and len(nxt) > 1
                                        and not re.fullmatch(r"-\d+(\.\d+)?", nxt)):
                yield a, nxt
                i += 2
            else:
                yield a, None
                i += 1
        else:
            yield None, a
            i += 1


def _json_value(raw: str, what: str, file: str, line: int | None) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {short(raw, 80)}",
                         file, line) from None
    except (RecursionError, ValueError):  # nested too deeply; an integer of > 4300 digits
        raise InputError(f"{what} is not JSON spectune reads (nested too deeply or a number too long): "
                         f"{short(raw, 80)}", file, line) from None


Option = tuple[str, Any, int | None]


def _vllm_file_options(data: dict[str, Any], file: str, node: yaml.Node | None) -> list[Option]:
    """Options of a ``vllm serve --config`` file as (option, value, line), in file order."""
    out = []
    for key, value in data.items():
        out.append(("--" + _norm_opt(str(key)), value, _line(_child(node, key))))
    return out


_FALSE = ("false", "0", "no", "off")


def _flag_on(val: Any) -> bool:
    """A store_true option as written: a bare flag, or a config file's true/false."""
    return val is None or val is True or (isinstance(val, str) and val.lower() not in _FALSE)


def _vllm_from_args(conf: Configured, args: list[str], folder: Path) -> None:
    opts: list[Option] = []
    file_opts: list[Option] = []
    for opt, val in _split_options(args):
        if opt is None:
            if conf.served_model is None:  # `vllm serve MODEL`: the first positional
                conf.served_model = val
            continue
        opt = _norm_opt(opt) if opt.startswith("--") else opt
        if opt in ("--enable-expert-parallel", "-ep") and isinstance(val, str) \
                and val.lower() not in (*_FALSE, "true", "1", "yes", "on"):
            # a store_true flag followed by a positional: _split_options paired them
            conf.served_model = conf.served_model or val
            val = None
        if opt == "--config" and val is not None:
            cfg_path = Path(val) if Path(val).is_absolute() else folder / val
            if input_file_problem(str(cfg_path)) is None:
                docs = _yaml_docs(read_input(str(cfg_path)), str(cfg_path))
            else:
                conf.warnings.append(f"cannot read the --config file {val} (looked at {cfg_path}); "
                                     "checked the command line alone")
                continue
            if docs and isinstance(docs[0][0], dict):
                file_opts = _vllm_file_options(docs[0][0], str(cfg_path), docs[0][1])
            continue
        opts.append((opt, val, conf.line))
    _vllm_apply(conf, file_opts, opts, conf.file)


def _vllm_apply(conf: Configured, file_opts: list[Option],
                cli_opts: list[Option], file: str) -> None:
    """Resolve vLLM's speculative settings: config file first, command line over it, dotted
    ``--speculative-config.KEY`` values combined and applied last (as FlexibleArgumentParser
    re-appends them), then ``--spec-method/--spec-model/--spec-tokens``."""
    spec: Any = None
    spec_line: int | None = conf.line
    dotted: dict[str, Any] = {}
    aliases: dict[str, Any] = {}
    legacy: dict[str, Any] = {}
    for opt, val, line in [*file_opts, *cli_opts]:
        if opt in ("--speculative-config", "-sc"):
            spec_line = line
            if isinstance(val, dict) or val is None:
                spec = val
            elif str(val) in ("", "None"):
                spec = None
            else:
                spec = _json_value(str(val), "--speculative-config", file, line)
        elif opt.startswith("--speculative-config."):
            key = opt.split(".", 1)[1]
            try:
                dotted[key] = json.loads(str(val)) if isinstance(val, str) else val
            except (json.JSONDecodeError, RecursionError, ValueError):
                dotted[key] = val
            spec_line = line
        elif opt in ("--spec-method", "--spec-model", "--spec-tokens"):
            aliases[{"--spec-method": "method", "--spec-model": "model",
                     "--spec-tokens": "num_speculative_tokens"}[opt]] = val
        elif opt in ("--speculative-model", "--num-speculative-tokens"):
            legacy["model" if opt == "--speculative-model" else "num_speculative_tokens"] = val
        elif opt in ("--data-parallel-size", "-dp"):
            conf.data_parallel = _int(val, opt, file, line, lo=1)
        elif opt in ("--tensor-parallel-size", "-tp"):
            conf.tensor_parallel = _int(val, opt, file, line, lo=1, hi=MAX_GPUS)
        elif opt in ("--enable-expert-parallel", "-ep"):
            conf.expert_parallel = _flag_on(val)
        elif opt == "--model" and val is not None:
            conf.served_model = str(val)
    if dotted:
        spec = dotted
    if spec is not None and not isinstance(spec, dict):
        raise InputError(f"--speculative-config must be a JSON object, got {spec!r}", file, spec_line)
    if aliases or legacy:
        spec = dict(spec or {})
        for key, val in {**legacy, **aliases}.items():
            if key in spec and key in aliases:
                raise InputError(f"--spec-{'tokens' if key == 'num_speculative_tokens' else key} and "
                                 f"--speculative-config['{key}'] are mutually exclusive (vLLM refuses "
                                 "both)", file, spec_line)
            spec[key] = val
    conf.line = spec_line
    if not spec:
        return
    spec = {str(k).replace("-", "_"): v for k, v in spec.items()}
    method = spec.get("method")
    model = spec.get("model")
    if method is None:  # vLLM's inference (vllm/config/speculative.py __post_init__)
        if model in ("ngram", "[ngram]"):
            method = "ngram"
        elif model is None:
            raise InputError("the speculative config has neither 'method' nor 'model'; vLLM cannot "
                             "tell which drafter to run", file, spec_line)
        elif "eagle3" in str(model).lower():
            method = "eagle3"
        elif "eagle-" in str(model).lower():
            method = "eagle"
        else:
            method = "draft_model"
        conf.warnings.append(f"no 'method' given: vLLM infers {method!r} from the model name "
                             f"{model!r}; state it explicitly")
    method = str(method)
    if method in _VLLM_MTP_ALIASES:
        method = "mtp"
    if method == "[ngram]":
        method = "ngram"
    conf.method = method
    conf.model = None if model in (None, "ngram", "[ngram]") else str(model)
    k = spec.get("num_speculative_tokens")
    if k is None:
        raise InputError("the speculative config has no num_speculative_tokens; spectune cannot tell "
                         "the draft length vLLM will use (it defaults to the draft checkpoint's "
                         "n_predict): set it explicitly", file, spec_line)
    if _int(k, "num_speculative_tokens", file, spec_line) <= 0:
        raise InputError(f"num_speculative_tokens must be > 0 (vLLM refuses {k!r})", file, spec_line)
    conf.gamma = _gamma(k, "num_speculative_tokens", file, spec_line, lo=1)
    lookup_n = tuple(None if spec.get(key) is None else _int(spec[key], key, file, spec_line, lo=1)
                     for key in ("prompt_lookup_min", "prompt_lookup_max"))
    conf.prompt_lookup = (lookup_n[0], lookup_n[1])
    sched = spec.get("num_speculative_tokens_per_batch_size")
    if sched is not None:
        conf.schedule = _vllm_schedule(sched, file, spec_line)
        conf.schedule_active = conf.data_parallel <= 1
        if not conf.schedule_active:
            conf.warnings.append(
                f"vLLM ignores num_speculative_tokens_per_batch_size with data_parallel_size = "
                f"{conf.data_parallel} (vllm/config/vllm.py, vllm-project/vllm#45963): it runs the "
                f"static num_speculative_tokens = {conf.gamma} at every batch size")
        elif max(k for _, _, k in conf.schedule) > conf.gamma:
            conf.warnings.append(f"the schedule asks for more than num_speculative_tokens = {conf.gamma}; "
                                 "vLLM clamps it to that")


def _int(val: Any, what: str, file: str, line: int | None, lo: int | None = None,
         hi: int | None = None, why: str = "") -> int:
    """``val`` as a whole number in ``lo..hi``; InputError (exit 2) naming file, line and
    ``what`` (the option) otherwise. ``why`` explains the bounds."""
    try:
        if isinstance(val, bool):
            raise ValueError
        f = float(val)
        if not math.isfinite(f) or int(f) != f:
            raise ValueError
        n = int(f)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{what} must be a whole number, got {val!r}", file, line) from None
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        bounds = (f"from {lo} to {hi}" if lo is not None and hi is not None
                  else f">= {lo}" if lo is not None else f"<= {hi}")
        raise InputError(f"{what} must be {bounds}, got {val!r}" + (f" ({why})" if why else ""),
                         file, line)
    return n


def _gamma(val: Any, what: str, file: str, line: int | None, lo: int = 0) -> int:
    """A draft length: a whole number in ``lo..GAMMA_LIMIT`` (the range of --gamma-max)."""
    return _int(val, what, file, line, lo, GAMMA_LIMIT,
                f"spectune evaluates draft lengths up to {GAMMA_LIMIT}, like --gamma-max")


def _vllm_schedule(sched: Any, file: str, line: int | None) -> list[Range]:
    """Validate as vLLM's validate_and_normalize_dynamic_sd_schedule does."""
    if not isinstance(sched, list) or not sched:
        raise InputError("num_speculative_tokens_per_batch_size must be a non-empty list of "
                         "[range_start, range_end, num_speculative_tokens]", file, line)
    out: list[Range] = []
    for entry in sched:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InputError(f"schedule entry {entry!r} is not [range_start, range_end, K]", file, line)
        lo, hi, k = (_int(x, "schedule entry", file, line) for x in entry)
        if lo <= 0 or hi <= 0 or lo > hi or k < 0:
            raise InputError(f"schedule entry {entry!r}: ranges must be positive with start <= end "
                             "and K >= 0", file, line)
        _gamma(k, f"num_speculative_tokens_per_batch_size entry {list(entry)!r}: K", file, line)
        out.append((lo, hi, k))
    out.sort()
    prev = 0
    for lo, hi, _ in out:
        if lo <= prev:
            raise InputError("schedule batch-size ranges overlap (vLLM refuses them)", file, line)
        prev = hi
    if out[0][0] != 1:
        raise InputError("the first schedule range must start at batch size 1 (vLLM refuses it "
                         "otherwise)", file, line)
    return out


# --------------------------------------------------------------------------- SGLang
def _sglang_from_args(conf: Configured, args: list[str], folder: Path) -> None:
    vals: dict[str, Any] = {}
    flags = set()
    for opt, val in _split_options(args):
        if opt is None:
            continue
        o = opt.replace("_", "-")
        if o in ("--speculative-adaptive", "--enable-dp-attention", "--enable-ep-moe"):
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
    conf.tensor_parallel = _int(vals.get("--tp-size", 1), "--tp-size", file, line, lo=1, hi=MAX_GPUS)
    ep = _int(vals.get("--ep-size", 1), "--ep-size", file, line, lo=1, hi=MAX_GPUS)
    conf.expert_parallel = ep > 1 or "--enable-ep-moe" in flags
    algo = vals.get("--speculative-algorithm")
    steps = vals.get("--speculative-num-steps")
    topk = vals.get("--speculative-eagle-topk")
    ndraft = vals.get("--speculative-num-draft-tokens")
    dp = _int(vals.get("--dp-size", 1), "--dp-size", file, line, lo=1)
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
    s = _gamma(steps, "--speculative-num-steps", file, line) if steps is not None else None
    t = _int(topk, "--speculative-eagle-topk", file, line, lo=1) if topk is not None else None
    n = None
    if ndraft is not None:  # NGRAM drafts num-draft-tokens - 1 tokens: a draft length
        n = (_int(ndraft, "--speculative-num-draft-tokens", file, line, 1, GAMMA_LIMIT + 1,
                  f"NGRAM drafts num-draft-tokens - 1; spectune evaluates draft lengths up to {GAMMA_LIMIT}")
             if algo == "NGRAM" else _int(ndraft, "--speculative-num-draft-tokens", file, line, lo=1))
    if algo == "NGRAM":  # SGLang takes NGRAM's topk from the BFS breadth (default 10)
        breadth = vals.get("--speculative-ngram-max-bfs-breadth")
        t = (_int(breadth, "--speculative-ngram-max-bfs-breadth", file, line, lo=1)
             if breadth is not None else 10)
    conf.sglang.update(num_steps=s, eagle_topk=t, num_draft_tokens=n)
    candidates: dict[int, list[int]] | None = None
    if adaptive:
        candidates, note = _sglang_adaptive(cfg_path, folder, file)
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


def _sglang_adaptive(path: str | None, folder: Path,
                     file: str) -> tuple[dict[int, list[int]] | None, str | None]:
    if path is None:
        return {int(k): v for k, v in SGLANG_DEFAULT_ADAPTIVE.items()}, (
            "--speculative-adaptive without a config: SGLang's built-in candidates are evaluated")
    p = Path(path) if Path(path).is_absolute() else folder / path
    if input_file_problem(str(p)) is not None:
        return None, (f"cannot read the adaptive config {path} (looked at {p}); the static "
                      "--speculative-num-steps is evaluated")
    data = json_document(read_input(str(p)), str(p))
    if not isinstance(data, dict):
        raise InputError("the adaptive config must be a JSON object", str(p), 1)
    out: dict[int, list[int]] = {}
    for key, entry in data.items():
        if not str(key).isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= GAMMA_LIMIT for s in steps):
            raise InputError(f"BS {key}: candidate_steps must be a non-empty list of whole numbers "
                             f"from 0 to {GAMMA_LIMIT}, got {steps!r}", str(p))
        out[int(key)] = steps
    if not out:
        raise InputError("the adaptive config has no integer batch-size key", str(p))
    return out, None


# --------------------------------------------------------------------------- evaluation
@dataclass
class CheckResult:
    document: Document
    exit_code: int
    warnings: list[str]
    notes: list[str]


ENGINE_NAME = {"vllm": "vLLM", "sglang": "SGLang"}


def _expected_method(engine: str, kind: str) -> str | None:
    from spectune.emit.sglang import SGLANG_ALGORITHMS
    from spectune.emit.vllm import VLLM_METHODS

    table = VLLM_METHODS if engine == "vllm" else SGLANG_ALGORITHMS
    return table.get(kind)


def _same_method(engine: str, configured: str, expected: str) -> bool:
    if engine == "sglang":
        alias = {"NEXTN": "EAGLE"}
        return alias.get(configured, configured) == alias.get(expected, expected)
    if configured == "ngram_gpu":
        configured = "ngram"
    return configured == expected


@dataclass
class _Reference:
    """What the gate compares against: the recommended settings for the configured engine
    (per-batch-size schedule, or one static gamma where the engine or parallelism cannot
    schedule), the gamma they run at each batch size, and the fix in the configured form."""

    gamma_at: Callable[[int], int]
    label: str  # e.g. "vLLM, gamma per batch size"
    fix: dict[str, Any] | None  # None when no fix can be emitted
    notes: list[str]


def _reference(rec: Recommendation, conf: Configured) -> _Reference:
    """The best configuration the engine can express for this deployment: the plan
    :func:`spectune.emit.plan.make_plan` produces, as the emitters turn it into settings."""
    from spectune.emit import make_plan
    from spectune.emit.sglang import render_adaptive, render_args, sglang_settings
    from spectune.emit.vllm import render_json, render_yaml, vllm_speculative_config

    plan = make_plan(rec)
    engine = ENGINE_NAME[conf.engine]
    batches = [int(b) for b in rec.grid.batch]

    def fixed(k: int) -> Callable[[int], int]:
        return lambda _b: k

    def ref(gamma_at: Callable[[int], int], fix: dict[str, Any] | None, notes: list[str],
            who: str = engine) -> _Reference:
        gammas = {gamma_at(b) for b in batches}
        label = (f"{who}, gamma per batch size" if len(gammas) > 1
                 else f"{who}, speculation off" if gammas == {0}
                 else f"{who}, one gamma = {gammas.pop()}")
        return _Reference(gamma_at, label, fix, notes)

    try:
        if conf.engine == "vllm":
            cfg, notes = vllm_speculative_config(rec, plan=plan)
            gamma_at = fixed(0)
            if cfg is not None:
                k = int(cfg["num_speculative_tokens"])
                sched = [(lo, hi, g) for lo, hi, g in cfg.get("num_speculative_tokens_per_batch_size") or []]
                gamma_at = (lambda b: lookup(sched, b, k)) if sched else fixed(k)
            if conf.form == "vllm-config-file":
                return ref(gamma_at, {"engine": "vllm", "format": "vllm-config-file",
                                      "snippet": render_yaml(cfg, rec)}, notes)
            text = "--speculative-config " + shlex.quote(render_json(cfg).strip()) + "\n"
            if cfg is None:
                text = "# remove --speculative-config: speculation does not pay at these operating points\n"
            return ref(gamma_at, {"engine": "vllm", "format": "command-line", "snippet": text}, notes)
        settings = sglang_settings(rec, plan=plan)
        doc: dict[str, Any] = {"engine": "sglang", "format": "command-line", "snippet": render_args(settings)}
        if not settings.args:
            doc["snippet"] = ("# remove every --speculative-* flag: speculation does not pay at these "
                              "operating points\n")
            return ref(fixed(0), doc, settings.notes)
        if settings.adaptive_config is not None:
            doc["adaptive_config"] = render_adaptive(settings)
            sched = list(plan.schedule)
            return ref(lambda b: lookup(sched, b), doc, settings.notes)
        steps = int(settings.args[settings.args.index("--speculative-num-steps") + 1])
        return ref(fixed(steps), doc, settings.notes)
    except InputError as exc:  # the engine cannot run the profile's drafter: the engine-neutral plan
        sched = list(plan.schedule)
        return ref(lambda b: lookup(sched, b), None, [f"no fix can be emitted: {exc.message}"],
                   "any engine")


def _norm_name(name: str) -> str:
    """A model name reduced for comparison: last path component, lower case, letters and
    digits only (``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama318binstruct``)."""
    return re.sub(r"[^a-z0-9]", "", name.rstrip("/").rsplit("/", 1)[-1].lower())


def _contains(longer: str, shorter: str) -> bool:
    """``shorter`` occurs in ``longer`` and is not cut out of a longer number there
    (``llama318b`` is in ``llama318binstruct``, not in ``llama3180b``)."""
    if len(shorter) < 4:
        return longer == shorter
    at = longer.find(shorter)
    while at >= 0:
        before = longer[at - 1] if at else ""
        after = longer[at + len(shorter):at + len(shorter) + 1]
        cut_before = before.isdigit() and shorter[0].isdigit()
        if not cut_before and not (after.isdigit() and shorter[-1].isdigit()):
            return True
        at = longer.find(shorter, at + 1)
    return False


def same_model(served: str, profile_names: Sequence[str]) -> bool:
    """Whether a served model (HF id or local path) is the profile's model, tolerantly: the
    reduced names (:func:`_norm_name`) are equal, or one contains the other (a release
    suffix such as ``-Instruct`` or ``-FP8``), for the model's name or any of its aliases."""
    a = _norm_name(served)
    for name in profile_names:
        b = _norm_name(name)
        if b and (a == b or _contains(a, b) or _contains(b, a)):
            return True
    return False


def deployment_mismatches(conf: Configured, dep: Deployment) -> list[str]:
    """How the configuration's deployment differs from the profile's: model, tensor /
    expert parallelism, engine and draft method, each naming both sides (empty: none)."""
    from spectune.profiles import builtin_aliases

    out: list[str] = []
    # A file that names no model is a fragment (the speculative settings of a `--config`
    # file whose model and parallelism are given elsewhere): those are not compared.
    whole = conf.served_model is not None
    if whole:
        names = [dep.model.name, *builtin_aliases("models", dep.model.name)]
        if not same_model(str(conf.served_model), names):
            out.append(f"model: the configuration serves {conf.served_model!r}, the profile is for "
                       f"{dep.model.name!r}")
    if whole and conf.tensor_parallel != dep.parallelism.tp:
        out.append(f"tensor parallelism: {conf.tensor_parallel} configured, {dep.parallelism.tp} in the "
                   "profile")
    moe = any(getattr(g.ffn, "n_experts", 0) for g in dep.model.layers)
    if whole and moe and dep.parallelism.gpus > 1 and conf.expert_parallel != (dep.parallelism.ep > 1):
        out.append(f"expert parallelism: {'on' if conf.expert_parallel else 'off'} configured, "
                   f"ep = {dep.parallelism.ep} in the profile")
    eng = dep.engine.name.lower()
    # an engine profile named for neither engine (custom costs) is not a mismatch: check() warns
    if any(e in eng for e in ENGINE_NAME) and conf.engine not in eng:
        out.append(f"engine: the configuration runs {ENGINE_NAME[conf.engine]}, the profile prices "
                   f"{dep.engine.name!r}")
    if conf.speculate and conf.method:
        expected = _expected_method(conf.engine, dep.drafter.kind)
        if expected is not None and not _same_method(conf.engine, conf.method, expected):
            out.append(f"draft method: {conf.method!r} configured, the profile's drafter "
                       f"{dep.drafter.name!r} is {dep.drafter.kind} ({ENGINE_NAME[conf.engine]} "
                       f"{expected!r})")
    return out


def check(conf: Configured, dep: Deployment, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """Evaluate ``conf`` at every operating point of ``dep``.

    The gate compares the configured speedup with the recommended settings' -- the best
    configuration the engine can express (:func:`_reference`), not gamma* per (batch,
    context), which no engine can follow across context lengths -- and fails where more
    than ``tolerance`` is lost, or where the configured speculation slows a point down.
    gamma* per point is reported alongside (``unconstrained_gamma``)."""
    from spectune.documents import sig
    from spectune.speedup import speedup_grid

    if not any(e in dep.engine.name.lower() for e in ENGINE_NAME) and dep.engine.name != "none":
        conf.warnings.append(f"the profile's engine {dep.engine.name!r} names neither vLLM nor SGLang: its "
                             f"costs are used for the configured {ENGINE_NAME[conf.engine]}")
    if conf.served_model is None:
        conf.warnings.append("the configuration names no model: model and parallelism are not compared "
                             "with the profile's (a fragment of a launch command?)")
    mismatches = deployment_mismatches(conf, dep)
    if mismatches:  # a verdict on another deployment would be silent wrong advice
        raise InputError("the serving configuration is not the profile's deployment: "
                         + "; ".join(mismatches), conf.file, conf.line)
    rec = recommend(dep)
    warnings = list(conf.warnings)
    if conf.sglang and conf.sglang.get("eagle_topk") == dep.drafter.topk > 1:
        # the profile describes this tree: it is priced as one
        warnings = [w for w in warnings if "drafts a tree" not in w]
        n_draft, steps = conf.sglang.get("num_draft_tokens"), conf.sglang.get("num_steps")
        width = int(verify_width(dep.drafter, steps)) if steps else None
        if n_draft is not None and width is not None and n_draft != width:
            warnings.append(f"--speculative-num-draft-tokens {n_draft} differs from the profile's "
                            f"tree ({width} verified tokens at {steps} steps): the prediction "
                            "assumes the profile's")
    notes = list(rec.notes)
    batches = [int(b) for b in rec.grid.batch]
    gmax = conf.max_gamma(batches)
    grid = rec.grid
    if gmax > int(rec.grid.gamma.max()):
        grid = speedup_grid(replace(dep, gamma_max=gmax))
        notes.append(f"the configuration drafts up to {gmax} tokens, past the profile's gamma_max = "
                     f"{dep.gamma_max}: evaluated on a grid extended to {gmax} (acceptance past the "
                     "measured positions holds the last rate)")
    kind = dep.drafter.kind
    if conf.speculate and conf.method:
        expected = _expected_method(conf.engine, kind)
        if expected is None:
            warnings.append(f"the profile's drafter is {kind!r}, which {ENGINE_NAME[conf.engine]} cannot "
                            f"run; the configured {conf.method!r} is evaluated with the profile's costs")
        want = (dep.drafter.prompt_lookup_min, dep.drafter.prompt_lookup_max)
        if conf.engine == "vllm" and conf.method == "ngram" and want[1] and conf.prompt_lookup != want:
            got = tuple(5 if n is None else n for n in conf.prompt_lookup)  # vLLM's default
            if got != want:
                warnings.append(f"configured n-gram prompt_lookup_min/max = {got[0]}/{got[1]} "
                                f"differ from the profile's {want[0]}/{want[1]}: the server drafts "
                                "differently from what the acceptance was measured with")
        if conf.model and dep.drafter.path and conf.model != dep.drafter.path:
            warnings.append(f"configured draft model {conf.model!r} differs from the profile's "
                            f"{dep.drafter.path!r}")
    ref = _reference(rec, conf)
    sp = grid.speedup
    points = []
    failing = 0
    worst: dict[str, Any] | None = None
    gap = (0.0, 0, 0)  # largest shortfall of the recommended settings from gamma*, batch, context
    for i, b in enumerate(rec.grid.batch):
        for j, s in enumerate(rec.grid.context):
            g = conf.gamma_at(int(b))
            sp_c = 1.0 if g == 0 else float(sp[i, j, g])
            g_r = ref.gamma_at(int(b))
            sp_r = 1.0 if g_r == 0 else float(rec.grid.speedup[i, j, g_r])
            sp_u = float(rec.speedup_star[i, j])
            shortfall = 1.0 - sp_c / sp_r
            slows = sp_c < 1.0 - 1e-9
            # a point whose KV cache does not fit cannot run: reported, not gated
            feasible = bool(rec.feasible[i, j])
            ok = not feasible or (shortfall <= tolerance and not slows)
            failing += not ok
            if feasible and 1.0 - sp_r / sp_u > gap[0]:
                gap = (1.0 - sp_r / sp_u, int(b), int(s))
            plain = float(b) / float(rec.grid.c0[i, j])
            point = {
                "batch": int(b), "context": int(s),
                "configured_gamma": g, "configured_speedup": sig(sp_c, 4),
                "recommended_gamma": g_r, "recommended_speedup": sig(sp_r, 4),
                "unconstrained_gamma": int(rec.gamma_star[i, j]), "unconstrained_speedup": sig(sp_u, 4),
                "shortfall": sig(shortfall, 4), "slows_down": slows, "feasible": feasible, "ok": ok,
                "plain_tokens_per_s": sig(plain, 5),
                "configured_tokens_per_s": sig(plain * sp_c, 5),
                "recommended_tokens_per_s": sig(plain * sp_r, 5),
            }
            points.append(point)
            if feasible and (worst is None or shortfall > worst["shortfall"]):
                worst = {"batch": int(b), "context": int(s), "shortfall": shortfall}
    if worst is None:  # no operating point fits in memory (the loader refuses weights that do not)
        worst = {"batch": int(rec.grid.batch[0]), "context": int(rec.grid.context[0]), "shortfall": 0.0}
    worst["shortfall"] = sig(worst["shortfall"], 4)
    exit_code = int(EXIT_GATE_FAILED if failing else EXIT_OK)
    n = len(points)
    if failing:
        slow = sum(p["slows_down"] and p["feasible"] for p in points)
        summary = (f"{failing} of {n} operating points fail: "
                   f"worst leaves {max(worst['shortfall'], 0) * 100:.1f}% of the recommended settings' "
                   f"speedup ({ref.label}) on the table (batch {worst['batch']}, context {worst['context']})"
                   + (f"; speculation slows {slow} point(s) down" if slow else ""))
    else:
        summary = (f"all {n} operating points within {tolerance * 100:g}% of the recommended settings' "
                   f"speedup ({ref.label})")
    if gap[0] > tolerance:
        b_gap = gap[1]
        per_batch = dict(per_batch_gamma(rec))
        why = ("gamma* changes with context length there and the engine sets one gamma per batch "
               "size (split the profile by context length to close it)"
               if ref.gamma_at(b_gap) == per_batch.get(b_gap) else
               "the engine runs one gamma for every batch size here")
        notes.append(f"even the recommended settings leave {gap[0] * 100:.1f}% of the unconstrained "
                     f"gamma* speedup on the table at batch {b_gap}, context {gap[2]}: {why}; the gate "
                     "compares against the settings the engine can take (unconstrained_gamma in "
                     "-o yaml|json is gamma* per point)")
    fix: dict[str, Any] | None = None
    if failing:
        notes += ref.notes
        if ref.fix is not None:
            fix = {**ref.fix, "max_shortfall": sig(max(gap[0], 0.0), 4)}
    sg = conf.sglang
    doc = envelope("CheckReport", {
        "metadata": {"spectune": __version__, "schema": "docs/schema.md#checkreport"},
        "verdict": "fail" if failing else "pass",
        "exit_code": exit_code,
        "tolerance": tolerance,
        "summary": summary,
        "config": {
            "file": conf.file,
            "format": conf.form,
            "line": conf.line,
            "engine": conf.engine,
            "method": conf.method if conf.speculate else None,
            "model": conf.model if conf.speculate else None,
            "speculate": conf.speculate,
            "num_speculative_tokens": conf.gamma if conf.speculate else None,
            "schedule": [list(r) for r in conf.schedule] if conf.schedule and conf.speculate else None,
            "schedule_active": bool(conf.schedule_active and conf.speculate),
            "data_parallel_size": conf.data_parallel,
            "sglang": dict(sg) if sg is not None else None,
        },
        "profile": {
            "name": dep.name,
            "model": dep.model.name,
            "drafter": {"kind": kind, "name": dep.drafter.name, "path": dep.drafter.path or None},
            "engine": dep.engine.name,
            "gamma_max": dep.gamma_max,
        },
        "points": points,
        "failing_points": failing,
        "worst": worst,
        "warnings": warnings,
        "fix": fix,
        "notes": notes,
    })
    return CheckResult(doc, exit_code, warnings, notes)
