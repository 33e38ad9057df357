"""Shell text as a serving configuration holds it: simple commands (words and the line each
starts on), comments, quotes, line continuations and ``sh -c`` scripts.

Nothing here knows an engine: :mod:`spectune.serving_config` asks each engine module
(:mod:`spectune.engines`) whether a command's words launch it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from spectune.errors import InputError

OPERATORS = {";", "&", "&&", "|", "||", "\n", "(", ")", ";;", "|&"}
REDIRECTS = {"<", ">", ">>", "<<", "<>", ">&", "<&", "&>", ">|", "&>>"}


def scan_shell(text: str) -> tuple[list[tuple[int, int]], int]:
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


def unclosed_quote_line(text: str) -> int:
    """Line of the last quote opened in ``text`` (1 when none): where shlex's "No closing
    quotation" comes from."""
    return text.count("\n", 0, scan_shell(text)[1]) + 1


def strip_comments(text: str) -> str:
    """Blank out shell comments (``#`` starting a word, outside quotes) keeping every offset
    and newline, so that a comment still ends its command."""
    out = list(text)
    for start, end in scan_shell(text)[0]:
        out[start:end] = " " * (end - start)
    return "".join(out)


def shell_commands(text: str, file: str) -> Iterator[tuple[list[str], int]]:
    """Simple commands of a shell text (words, line of the first word); line continuations
    joined, quotes handled by :mod:`shlex`, comments dropped, operators split commands."""
    flat = text.replace("\\\r\n", "   ").replace("\\\n", "  ")  # same length: offsets = lines
    lex = shlex.shlex(strip_comments(flat), posix=True, punctuation_chars=";&|()<>\n")
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
            if tok in OPERATORS:
                if words:
                    yield words, first_line
                words = []
                continue
            if tok in REDIRECTS:
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
        raise InputError(f"cannot parse the shell text: {exc}", file, unclosed_quote_line(text)) from None
    if words:
        yield words, first_line


def is_shell_c(word: str, flag: str) -> bool:
    """``sh -c`` / ``bash -lc``: the next word is a script."""
    return word.rsplit("/", 1)[-1] in ("sh", "bash", "dash", "zsh") and bool(re.fullmatch(r"-\w*c\w*", flag))


def shell_c_script(words: list[str]) -> int | None:
    """Index of the script word of ``sh -c SCRIPT`` among ``words`` (None: no such script)."""
    for i, w in enumerate(words[:-1]):
        if is_shell_c(w, words[i + 1]):
            return i + 2 if i + 2 < len(words) else None
    return None
