"""Reading every input document the same bounded, checked way.

Profiles (user and built-in), config.json files, observation files and serving
configurations all come in through here:

* :func:`read_input` -- a regular file or ``-`` (stdin) only, at most
  :data:`~spectune.base.limits.MAX_INPUT_BYTES`, UTF-8 (a clear error naming the line of the
  first bad byte otherwise). A directory, ``/dev/zero`` or a FIFO is refused before a byte
  is read.
* :func:`yaml_documents` -- YAML through a first pass over the parser's events that refuses
  nesting deeper than :data:`~spectune.base.limits.MAX_YAML_DEPTH` (libyaml's composer recurses
  in C and would crash; its scanner has a limit and wording of its own, never shown),
  documents that expand, aliases included, to more than
  :data:`~spectune.base.limits.MAX_YAML_NODES` nodes (an alias bomb) and whole numbers of more
  than :data:`~spectune.base.limits.MAX_DIGITS` digits, then refuses mapping keys that are not
  text (``1: x``, ``yes: x``).
* :func:`parse_json` / :func:`json_document` -- every JSON text a user or a server gives
  (config.json, recorded rounds, adaptive configs, option values): no NaN / Infinity /
  overflowing numbers, whole numbers of at most :data:`~spectune.base.limits.MAX_DIGITS`
  digits, nesting at most :data:`~spectune.base.limits.MAX_JSON_DEPTH` deep, each checked by
  spectune before the parser could fail in its own words.
* :func:`number_problem` -- what is wrong with a number (not a number, not finite, not
  whole, out of range), for every validator to phrase the same way.

Every failure is an :class:`~spectune.base.errors.InputError` (exit 2): one line naming the
file, the line and, where there is one, the key.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import math
import os
import re
import stat
import sys
from typing import Any

from spectune.base.errors import InputError
from spectune.base.limits import MAX_DIGITS, MAX_INPUT_BYTES, MAX_JSON_DEPTH, MAX_YAML_DEPTH, MAX_YAML_NODES

#: Integers beyond this magnitude are refused before any float conversion (float(10**400) raises).
MAX_INT_MAGNITUDE = 2**63
#: The name of standard input in messages (``-`` on the command line).
STDIN = "<stdin>"
#: What a YAML file may be called.
YAML_SUFFIXES = (".yaml", ".yml")


def short(value: Any, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters: messages never echo a huge value. A
    whole number too long for ``str()`` (CPython refuses past its int-digits limit: 4300
    digits by default, 640 at the lowest; a YAML ``0x...`` of any length is read) shows its
    leading digits."""
    if isinstance(value, int) and value.bit_length() > 2000:  # > 600 digits
        lead = abs(value) // 10 ** (int(math.log10(abs(value))) - width)  # width + 1 digits
        text = ("-" if value < 0 else "") + str(lead) + "..."
    else:
        try:
            text = repr(value)
        except ValueError:  # such a number inside a list or mapping
            text = f"a {type(value).__name__} holding a number too long to show"
    return text if len(text) <= width else text[: width - 3] + "..."


# --------------------------------------------------------------------------- bytes -> text
def _stdin_bytes(limit: int) -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return bytes(stream.read(limit))
    return sys.stdin.read(limit).encode("utf-8", errors="surrogateescape")


def input_file_problem(path: str, stdin_ok: bool = True) -> str | None:
    """Why ``path`` cannot be read as an input file (None: it is a readable regular file);
    ``stdin_ok``: the message offers ``-`` (stdin) instead."""
    try:
        st = os.stat(path)
    except OSError as exc:
        # A name longer than the system allows names no file, like a missing one.
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
            return f"no such file: {path}"
        return f"cannot read {path}: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return f"{path} is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return (f"{path} is not a regular file (a device, pipe or socket); give a file"
                + (", or '-' for stdin" if stdin_ok else ""))
    return None


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a readable regular file: the one test every lookup of a name
    (a built-in, a shipped example, a document, a referenced file) makes. Never raises:
    a name the system cannot look up (longer than a file name may be, a loop of links) is
    no file, where :meth:`pathlib.Path.is_file` raises OSError for some of them."""
    return input_file_problem(os.fspath(path)) is None


def read_input(path: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the file ``path`` or of stdin (``-``), at most ``max_bytes``."""
    name = STDIN if path == "-" else str(path)
    if path == "-":
        data = _stdin_bytes(max_bytes + 1)
    else:
        problem = input_file_problem(str(path))
        if problem:
            raise InputError(problem)
        try:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InputError(f"larger than {max_bytes >> 20} MiB: not a profile, config or observation "
                         "file spectune reads", name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "spectune reads UTF-8 YAML or JSON", name, line) from None


# --------------------------------------------------------------------------- YAML
def _yaml_error(exc: Exception, file: str) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return InputError(f"not valid YAML: {problem}", file, mark.line + 1 if mark else None)


def _loader(text: str, pure: bool = False) -> Any:
    import yaml

    # libyaml's C parser when the wheel has it: 5-10x faster on large config.json blocks.
    return yaml.SafeLoader(text) if pure else getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)


def _bound_events(text: str, file: str) -> None:
    """Refuse documents nested deeper than MAX_YAML_DEPTH or expanding past MAX_YAML_NODES,
    with spectune's own message whatever PyYAML's version.

    The fast pass reads libyaml's events. libyaml has a nesting limit of its own (1000 levels
    in PyYAML 6.0.4's wheel; its scanner looks ahead, so it can raise before the event at our
    depth arrives) and words it its own way. So any parser error from the fast pass is
    re-examined by PyYAML's pure-Python parser, which is iterative and has no nesting limit:
    a document too deep or too large gets spectune's message from it; any other error is the
    fast parser's."""
    import yaml

    try:
        _walk_events(_loader(text), file)
    except yaml.YAMLError as exc:
        with contextlib.suppress(yaml.YAMLError):
            _walk_events(_loader(text, pure=True), file)
        raise _yaml_error(exc, file) from None


def _walk_events(loader: Any, file: str) -> None:
    """One pass over the parser's events: nesting depth and nodes after alias expansion.

    A node's expanded size is 1 + its children's; an alias counts the size of the node its
    anchor names, so ``a: &a [x, x]``, ``b: &b [*a, *a]``, ... doubles at each level and is
    refused long before it is built. Parser errors propagate as yaml.YAMLError."""
    import yaml

    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, expanded size so far, line]
    total = 0

    def add(anchor: str | None, size: int, line: int) -> None:
        nonlocal total
        if anchor:
            sizes[anchor] = size
        if stack:
            stack[-1][1] += size
            size = stack[-1][1]
        else:
            total += size
            size = total
        if size > MAX_YAML_NODES:
            raise InputError(f"expands to more than {MAX_YAML_NODES:,} nodes (aliases included): "
                             "refused", file, line)

    try:
        while loader.check_event():
            ev = loader.get_event()
            line = ev.start_mark.line + 1 if ev.start_mark is not None else 1
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= MAX_YAML_DEPTH:
                    raise InputError(f"nested more than {MAX_YAML_DEPTH} levels deep: refused", file, line)
                stack.append([ev.anchor, 1, line])
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, size, start = stack.pop()
                add(anchor, size, start)
            elif isinstance(ev, yaml.ScalarEvent):
                problem = _digits_problem(ev.value) if not ev.style else None
                if problem and _LONG_WHOLE.fullmatch(ev.value):
                    raise InputError(problem, file, line)
                add(ev.anchor, 1, line)
            elif isinstance(ev, yaml.AliasEvent):
                add(None, sizes.get(ev.anchor or "", 1), line)
            elif isinstance(ev, yaml.DocumentEndEvent):
                total = 0
    finally:
        loader.dispose()


#: A plain scalar YAML 1.1 reads as a whole number: decimal (sexagesimal ``1:30`` and octal
#: ``017`` included), ``0x`` hexadecimal or ``0b`` binary. int() of a long decimal one fails
#: in CPython's own words, and str() of a long one of any base does, so they are refused first.
_LONG_WHOLE = re.compile(r"[-+]?(?:0x[0-9a-fA-F_]+|0b[01_]+|[0-9][0-9_:]*)")
_DIGITS_PER_CHAR = {"0x": math.log10(16), "0b": math.log10(2)}


def _digits_problem(token: str) -> str | None:
    """What is wrong with a whole number written ``token`` (None: not too long): its
    decimal digits (a hexadecimal digit counts 1.2) past MAX_DIGITS."""
    if len(token) <= MAX_DIGITS // 2:
        return None
    body = token.lstrip("+-")
    per_char = _DIGITS_PER_CHAR.get(body[:2])
    if per_char is None:
        digits = sum(c.isdigit() for c in body)
    else:
        digits = round(sum(c != "_" for c in body[2:]) * per_char)
    return None if digits <= MAX_DIGITS else \
        f"a whole number of {digits:,} digits is out of range (at most {MAX_DIGITS})"


_TEXT_KEY_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge")
_INT_KEY_TAGS = (*_TEXT_KEY_TAGS, "tag:yaml.org,2002:int")


def _check_keys(node: Any, file: str, tags: tuple[str, ...] = _TEXT_KEY_TAGS) -> None:
    """Every mapping key is text (a scalar resolving to a string, or ``<<``), or one of ``tags``."""
    import yaml

    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode) or k.tag not in tags:
                    shown = short(k.value) if isinstance(k, yaml.ScalarNode) else "a mapping or list"
                    raise InputError(f"keys must be text, got {shown} (quote it: \"{k.value}\")"
                                     if isinstance(k, yaml.ScalarNode) else
                                     f"keys must be text, got {shown}", file, k.start_mark.line + 1)
                todo.append(v)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)


def yaml_documents(text: str, file: str, int_keys: bool = False) -> list[tuple[Any, Any]]:
    """Every document of a YAML stream as (data, node), empty documents left out; bounded
    and checked as the module docstring says. ``int_keys``: whole-number keys are allowed
    too (a serving configuration's, e.g. a per-batch-size schedule)."""
    import yaml

    _bound_events(text, file)
    loader = _loader(text)
    docs: list[tuple[Any, Any]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_keys(node, file, _INT_KEY_TAGS if int_keys else _TEXT_KEY_TAGS)
            docs.append((loader.construct_document(node), node))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a timestamp out of range
        raise InputError(f"not valid YAML: {exc}", file) from None
    finally:
        loader.dispose()
    return [(d, n) for d, n in docs if d is not None]


def yaml_document(text: str, file: str) -> tuple[Any, Any]:
    """The single document of ``text`` as (data, node); (None, None) when empty."""
    docs = yaml_documents(text, file)
    if len(docs) > 1:
        raise InputError(f"expected one YAML document, found {len(docs)} (separated by ---)", file)
    return docs[0] if docs else (None, None)


# --------------------------------------------------------------------------- JSON
#: A JSON string (escapes included), or an unclosed one up to the end of the text.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)'
_STRINGS = re.compile(_STRING, re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
#: Strings (skipped), brackets and the tokens a parse hook may refuse (numbers, constants).
_TOKENS = re.compile(_STRING + r"|[\[\]{}]|-?Infinity|NaN|-?[0-9][0-9.eE+-]*", re.DOTALL)
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JsonProblem(ValueError):
    """What is wrong with a JSON text, in spectune's words, and the offset where it is;
    ``syntax``: the text is not JSON at all (else: JSON spectune refuses)."""

    def __init__(self, message: str, offset: int, syntax: bool = False) -> None:
        super().__init__(message)
        self.message, self.offset, self.syntax = message, offset, syntax


class _Refused(ValueError):
    """A parse hook refused ``token``; its offset is found afterwards (hooks get no position)."""

    def __init__(self, message: str, token: str) -> None:
        super().__init__(message)
        self.message, self.token = message, token


def _too_deep(text: str) -> int | None:
    """Offset of the first bracket nested deeper than MAX_JSON_DEPTH (None: none is).

    Checked before parsing, so that the parser's own recursion (RecursionError, or a crash
    in C) is never what stops a deep document. Linear: strings and everything that is not
    a bracket are dropped by regular expressions, and the running depth is summed in C; the
    token-by-token walk that finds the offset runs only for a document that is too deep."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    if max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets.encode())), default=0) \
            <= MAX_JSON_DEPTH:
        return None
    depth = 0
    for m in _TOKENS.finditer(text):
        c = text[m.start()]
        if c in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return m.start()
        elif c in "]}":
            depth -= 1
    return None  # pragma: no cover - the sum above found a deeper point


def _offset_of(text: str, token: str) -> int:
    """Offset of the first ``token`` (a number or constant) outside strings; 0 if not found."""
    return next((m.start() for m in _TOKENS.finditer(text) if m.group() == token), 0)


def _whole_number(token: str) -> int:
    problem = _digits_problem(token)  # int() refuses long ones in its own words (CPython 3.11+)
    if problem:
        raise _Refused(problem, token)
    return int(token)


def _finite_float(token: str) -> float:
    x = float(token)
    if not math.isfinite(x):
        raise _Refused(f"number {short(token)} is out of range", token)
    return x


def _no_constant(token: str) -> Any:
    raise _Refused(f"{token} is not a number JSON allows (nor spectune)", token)


def parse_json(text: str) -> Any:
    """Parse JSON text: NaN, Infinity, numbers that overflow, whole numbers of more than
    MAX_DIGITS digits and nesting deeper than MAX_JSON_DEPTH are refused like a syntax
    error. Every problem is a :class:`JsonProblem` (its offset locates it)."""
    import json

    deep = _too_deep(text)
    if deep is not None:
        raise JsonProblem(f"nested too deeply: more than {MAX_JSON_DEPTH} levels", deep)
    try:
        return json.loads(text, parse_int=_whole_number, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise JsonProblem(exc.msg, exc.pos, syntax=True) from None
    except _Refused as exc:
        raise JsonProblem(exc.message, _offset_of(text, exc.token)) from None


def json_document(text: str, file: str) -> Any:
    """Parse the JSON text of the file ``file`` (:func:`parse_json`); every problem is an
    InputError naming the file and line."""
    try:
        return parse_json(text)
    except JsonProblem as exc:
        raise InputError(f"not valid JSON: {exc.message}", file,
                         text.count("\n", 0, exc.offset) + 1) from None


# --------------------------------------------------------------------------- numbers
def number_problem(value: Any, *, integer: bool = False, positive: bool = False,
                   lo: float | None = None, hi: float | None = None) -> str | None:
    """What is wrong with ``value`` as a number (None: nothing). Booleans are not numbers;
    NaN, infinities and integers beyond 2**63 are refused before any comparison (NaN
    passes every range check by failing all comparisons)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a {'whole ' if integer else ''}number, got {short(value)}"
    if isinstance(value, int) and abs(value) > MAX_INT_MAGNITUDE:
        return f"expected a number of magnitude at most 2**63, got {short(value)}"
    x = float(value)
    if not math.isfinite(x):
        return f"expected a finite number, got {short(value)}"
    if integer and not x.is_integer():
        return f"expected a whole number, got {short(value)}"
    if positive and x <= 0:
        return f"expected a number > 0, got {short(value)}"
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        return f"expected a number in [{lo}, {hi}], got {short(value)}" if lo is not None and \
            hi is not None else (f"expected a number >= {lo}, got {short(value)}" if lo is not None
                                 else f"expected a number <= {hi}, got {short(value)}")
    return None
