"""What a serving configuration serves: a ``vllm serve --config`` YAML file, a vLLM or
SGLang command line (a text file or shell script), or a Kubernetes manifest whose
container command/args hold one, read into :class:`~spectune.engines.options.Configured`.

This module finds the engine command (:mod:`spectune.engines.shell`, :mod:`spectune.engines.manifests`);
the engine's module (:mod:`spectune.engines`) reads its options as the engine would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import spectune.engines.vllm as _vllm
from spectune.base.errors import InputError
from spectune.documents.families import DEFAULT_ENGINE
from spectune.documents.inputs import input_file_problem, read_input, yaml_documents
from spectune.documents.profiles import read_text
from spectune.engines.manifests import line_of, manifest_containers
from spectune.engines.options import Configured, split_options
from spectune.engines.quantization import from_args, from_config_file
from spectune.engines.registry import ENGINES, engine_for
from spectune.engines.shell import shell_c_script, shell_commands


@dataclass
class _Command:
    engine: str
    args: list[str]
    line: int
    env: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # literal NAME=value it runs with


#: a shell assignment word, ``NAME=value``
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)


def _assignments(words: list[str], line: int) -> dict[str, tuple[str, int | None]]:
    """The ``NAME=value`` words of ``words`` (an ``env``/``export`` prefix, assignments
    before a command), each with ``line``."""
    found = (_ASSIGNMENT.fullmatch(w) for w in words)
    return {m[1]: (m[2], line) for m in found if m}


def read_serving_config(path: str) -> Configured:
    """Parse a serving configuration file; InputError (exit 2) names the file and line."""
    p = Path(path)
    text = read_text(path)
    if p.suffix.lower() in (".yaml", ".yml", ".json"):
        return _from_yaml(text, path)
    return _from_shell(text, path, p.parent)


def _from_yaml(text: str, file: str) -> Configured:
    docs = yaml_documents(text, file, int_keys=True)
    if not docs:
        raise InputError("empty file: expected a `vllm serve --config` YAML file or a Kubernetes "
                         "manifest", file, 1)
    if any(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d, _ in docs):
        return _from_kubernetes(docs, file)
    if len(docs) > 1 or not isinstance(docs[0][0], dict):
        raise InputError("expected a `vllm serve --config` YAML mapping (option: value) or a "
                         "Kubernetes manifest (apiVersion, kind)", file, line_of(docs[0][1]))
    data, node = docs[0]
    # the engine whose config file it is: one that claims it, else the default engine (vLLM reads
    # any mapping of options)
    claims = [e for e in ENGINES.values() if e.CONFIG_FORM and e.claims_config_file(data)]
    engine = next((e for e in claims if e.NAME != DEFAULT_ENGINE), engine_for(DEFAULT_ENGINE))
    conf = Configured(engine.NAME, engine.CONFIG_FORM or "", file, 1)
    engine.read_config_file(conf, data, node)
    _storage(conf, from_config_file(data))
    return conf


def _engine_command(words: list[str]) -> tuple[str, list[str], int] | None:
    """(engine, arguments, index of the launch word) when ``words`` launch an engine, else None."""
    for i in range(len(words)):
        for name, engine in ENGINES.items():
            args = engine.launch_args(words, i)
            if args is not None:
                return name, args, i
    return None


def _find_commands(text: str, file: str, base_line: int = 0,
                   env: dict[str, tuple[str, int | None]] | None = None) -> list[_Command]:
    """The engine commands of a shell script, each with the environment it runs with: ``env``
    (a container's), what earlier ``export NAME=value`` / ``NAME=value`` lines set and its own
    ``NAME=value`` prefix words."""
    out = []
    env = dict(env or {})
    for words, line in shell_commands(text, file):
        at = base_line + line
        found = _engine_command(words)
        if found:
            out.append(_Command(found[0], found[1], at, {**env, **_assignments(words[:found[2]], at)}))
            continue
        if words and (words[0] == "export" or _ASSIGNMENT.fullmatch(words[0])):
            env.update(_assignments(words, at))
            continue
        script = shell_c_script(words)  # sh -c '...' / bash -lc "..." nest a script
        if script is not None:
            out += _find_commands(words[script], file, at - 1, {**env, **_assignments(words[:script], at)})
    return out


def _labels() -> str:
    """The engines, for messages: "vLLM, SGLang or TensorRT-LLM"."""
    labels = [e.LABEL for e in ENGINES.values()]
    return ", ".join(labels[:-1]) + f" or {labels[-1]}" if len(labels) > 1 else labels[0]


def _launches(tail: str) -> str:
    """How a command line launches each engine, for messages (``tail`` after each)."""
    forms = [f"`{form}{tail}`" for e in ENGINES.values() for form in e.LAUNCHES]
    return ", ".join(forms[:-1]) + f" or {forms[-1]}" if len(forms) > 1 else forms[0]


def _from_shell(text: str, file: str, folder: Path) -> Configured:
    cmds = _find_commands(text, file)
    if not cmds:
        raise InputError(f"no {_labels()} command found (expected {_launches(' ...')})", file)
    conf = _from_command(cmds[0], "command-line", file, folder)
    if len(cmds) > 1:
        conf.warnings.append(f"{len(cmds)} engine commands found; checked the first (line {cmds[0].line})")
    return conf


def _from_command(cmd: _Command, form: str, file: str, folder: Path) -> Configured:
    conf = Configured(cmd.engine, form, file, cmd.line, env=dict(cmd.env))
    engine_for(cmd.engine).read_args(conf, cmd.args, folder)
    _storage(conf, _referenced_config(cmd, folder))  # a `--config FILE` first, the command line over it
    _storage(conf, from_args(cmd.args))
    return conf


def _referenced_config(cmd: _Command, folder: Path) -> dict[str, str]:
    """--quantization / --kv-cache-dtype of the `vllm serve --config FILE` a command names (the
    engine module has read the file already; one it could not read gives nothing here)."""
    found: dict[str, str] = {}
    for opt, val in split_options(cmd.args):
        f = Path(val or "") if Path(val or "").is_absolute() else folder / (val or "")
        if cmd.engine == _vllm.NAME and opt == "--config" and val and input_file_problem(str(f)) is None:
            docs = yaml_documents(read_input(str(f)), str(f))
            if docs and isinstance(docs[0][0], dict):
                found.update(from_config_file(docs[0][0]))
    return found


def _storage(conf: Configured, found: dict[str, str]) -> None:
    """The configured --quantization / --kv-cache-dtype (:mod:`spectune.engines.quantization`)."""
    conf.quantization = found.get("quantization", conf.quantization)
    conf.kv_cache_dtype = found.get("kv_cache_dtype", conf.kv_cache_dtype)


def _from_kubernetes(docs: list[tuple[Any, yaml.Node]], file: str) -> Configured:
    found: list[tuple[_Command, str]] = []
    for c in manifest_containers(docs, file):
        image = [name for name, e in ENGINES.items() if e.runs_image(c.image)]
        if not c.command and image:  # the image's entrypoint runs the engine: args are its
            found.append((_Command(image[0], c.words, c.line, dict(c.env)), c.name))
            continue
        hit = _engine_command(c.words)
        if hit:
            env = {**c.env, **_assignments(c.words[:hit[2]], c.line)}
            found.append((_Command(hit[0], hit[1], c.line, env), c.name))
            continue
        k = shell_c_script(c.words)
        if k is not None:
            found += [(cmd, c.name) for cmd in _find_commands(c.words[k], file, c.word_base_line(k), c.env)]
    if not found:
        raise InputError(f"no container of this Kubernetes manifest runs {_labels()} (looked for "
                         f"{_launches('')} in command/args, or args for an image of theirs)", file)
    cmd, name = found[0]
    conf = _from_command(cmd, "kubernetes", file, Path(file).parent)
    if len(found) > 1:
        conf.warnings.insert(0, f"{len(found)} engine containers found; checked {name!r} (line {cmd.line})")
    return conf


__all__ = ["Configured", "read_serving_config"]
