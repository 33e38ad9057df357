"""Kubernetes (and compose-like) manifests as serving configurations: every container of
every document, its command and args with ``$(VAR)`` expanded from literal env values,
and the YAML node each came from, for file:line in messages.

Nothing here knows an engine: :mod:`spectune.engines.serving_config` asks the engine modules
whether a container's words launch one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from spectune.base.errors import InputError


def child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    """The YAML node under ``key`` (a mapping key, or a sequence index) of ``node``."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                return v
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def line_of(node: yaml.Node | None) -> int | None:
    """1-based line where ``node`` starts (None without a node)."""
    return node.start_mark.line + 1 if node is not None else None


def containers(data: Any, node: yaml.Node | None) -> Iterator[tuple[dict[str, Any], yaml.Node | None]]:
    """Every container of a manifest (Deployment, StatefulSet, Pod, Job, LeaderWorkerSet, List...)."""
    if isinstance(data, dict):
        for key, value in data.items():
            sub = child(node, key)
            if key in ("containers", "initContainers") and isinstance(value, list):
                if key == "containers":
                    for i, c in enumerate(value):
                        if isinstance(c, dict):
                            yield c, child(sub, i)
                continue
            yield from containers(value, sub)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from containers(item, child(node, i))


def expand_env(words: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion in command/args from literal env values."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), w)
            for w in words]


@dataclass
class Container:
    """One container as it would start: its words (command + args, env expanded)."""

    name: str
    image: str
    command: list[str]
    words: list[str]
    line: int  # where its args (else command, else the container) start
    node: yaml.Node | None
    #: its literal ``env`` values: name -> (value, line of the entry)
    env: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    def word_base_line(self, k: int) -> int:
        """The line before the first line of word ``k``'s text (a script given to ``sh -c``):
        a block scalar's text starts a line below its indicator."""
        item = (child(child(self.node, "command"), k) if k < len(self.command)
                else child(child(self.node, "args"), k - len(self.command)))
        if isinstance(item, yaml.ScalarNode):
            return item.start_mark.line + (1 if item.style in ("|", ">") else 0)
        return self.line


def manifest_containers(docs: list[tuple[Any, yaml.Node]], file: str) -> Iterator[Container]:
    """Every container of the documents, command/args/env checked (InputError, exit 2,
    naming file, line and key, when one is not a list of strings)."""
    for data, node in docs:
        for c, cnode in containers(data, node):
            name = str(c.get("name") or "?")
            for key in ("command", "args", "env"):
                if c.get(key) is not None and not isinstance(c[key], list):
                    raise InputError(f"container {name!r}: {key} must be a list, got "
                                     f"{type(c[key]).__name__}", file, line_of(child(cnode, key)), key)
            for key in ("command", "args"):
                bad = [x for x in c.get(key) or [] if isinstance(x, (dict, list))]
                if bad:
                    raise InputError(f"container {name!r}: {key} must be a list of strings", file,
                                     line_of(child(cnode, key)), key)
            command = [str(x) for x in (c.get("command") or [])]
            args = [str(x) for x in (c.get("args") or [])]
            entries = {str(e["name"]): (str(e["value"]), line_of(child(child(cnode, "env"), i)))
                       for i, e in enumerate(c.get("env") or [])
                       if isinstance(e, dict) and "name" in e and "value" in e}
            env = {k: v for k, (v, _) in entries.items()}
            where = child(cnode, "args") or child(cnode, "command") or cnode
            yield Container(name, str(c.get("image", "")), command, expand_env(command + args, env),
                            line_of(where) or 1, cnode, entries)
