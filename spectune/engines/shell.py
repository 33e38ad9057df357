"""Shell text as a serving configuration holds it: simple commands (words and the line each
starts on), comments, quotes, line continuations and ``sh -c`` scripts.

Nothing here knows an engine: :mod:`spectune.engines.serving_config` asks each engine module
(:mod:`spectune.engines`) whether a command's words launch it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from spectune.base.errors import InputError

REDIRECTS = {"<", ">", ">>", "<<", "<>", ">&", "<&", "&>", ">|", "&>>"}


#: What quoting hides from the shell, in the order a scan meets it: an escaped character, a
#: single- or double-quoted string (closed, or open to the end of the text), a comment (``#``
#: starting a word, to the end of its line).
_QUOTING = re.compile(r"""\\[\s\S]?|(?P<q>'[^']*(?:'|\Z)|"[^"\\]*(?:\\[\s\S]?[^"\\]*)*(?:"|\Z))"""
                      r"|(?P<c>(?:(?<=[ \t\n;&|(])|(?<![\s\S]))#[^\n]*)")


def scan_shell(text: str) -> tuple[list[tuple[int, int]], int]:
    """One pass over shell quoting: the comment spans ``(start, end)`` -- ``#`` starting a
    word, outside quotes, up to the end of its line -- and the offset of the last quote
    opened (0 when none). A backslash escapes the next character outside quotes and inside
    double quotes. Linear (one regular-expression scan)."""
    comments: list[tuple[int, int]] = []
    last_quote = 0
    for m in _QUOTING.finditer(text):
        if m.lastgroup == "q":
            last_quote = m.start()
        elif m.lastgroup == "c":
            comments.append(m.span())
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


#: The tokens of ``shlex.shlex(posix=True, punctuation_chars=PUNCTUATION)`` with whitespace
#: " \t\r" and no commenters, as one regular expression: a run of punctuation; a word of
#: word characters, quoted parts and escaped characters; any other character alone.
#: (shlex itself grows each token a character at a time, quadratic in a long word, and
#: gives no offsets; this is linear and gives each token's start.)
PUNCTUATION = ";&|()<>\n"
_WORDCHARS = shlex.shlex("", posix=True, punctuation_chars=PUNCTUATION).wordchars
_PART = (rf"[{re.escape(_WORDCHARS)}]+|'[^']*'|\"[^\"\\]*(?:\\[\s\S][^\"\\]*)*\"|\\[\s\S]")
_TOKEN = re.compile(rf"[ \t\r]+|(?P<punct>[{re.escape(PUNCTUATION)}]+)|(?P<word>(?:{_PART})+)"
                    rf"|(?P<open>['\"])|(?P<escape>\\)|(?P<other>[\s\S])")
_PARTS = re.compile(_PART)
_OPEN_DOUBLE = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*')
_IN_DOUBLE_QUOTES = re.compile(r"\\([\s\S])")


def _word(raw: str) -> str:
    """The value of a word token: quotes removed, escapes resolved as POSIX shlex does
    (inside double quotes a backslash escapes only ``"`` and ``\\``)."""
    if not any(c in raw for c in "'\"\\"):
        return raw
    out = []
    for part in _PARTS.findall(raw):
        if part[0] == "'":
            out.append(part[1:-1])
        elif part[0] == '"':
            out.append(_IN_DOUBLE_QUOTES.sub(lambda m: m[1] if m[1] in '"\\' else m[0], part[1:-1]))
        elif part[0] == "\\":
            out.append(part[1])
        else:
            out.append(part)
    return "".join(out)


def shell_tokens(text: str) -> Iterator[tuple[str, int, bool]]:
    """(token, offset of its first character, whether it is a run of punctuation) of
    ``text``, as :data:`_TOKEN` says; ValueError for a quote never closed or a backslash at
    the end, as shlex raises."""
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:
            continue  # whitespace
        if kind == "open":  # unclosed: ends inside the string, or on a backslash within it
            inside = _OPEN_DOUBLE.match(text, m.start()) if m[0] == '"' else None
            raise ValueError("No escaped character" if inside and inside.end() < len(text)
                             else "No closing quotation")
        if kind == "escape":
            raise ValueError("No escaped character")
        yield (_word(m[0]) if kind == "word" else m[0]), m.start(), kind == "punct"


def shell_commands(text: str, file: str) -> Iterator[tuple[list[str], int]]:
    """Simple commands of a shell text (words, line of the first word); line continuations
    joined, quotes handled as :mod:`shlex` does, comments dropped, operators split commands.
    Linear in the text: lines are counted as the tokens go."""
    flat = text.replace("\\\r\n", "   ").replace("\\\n", "  ")  # same length: offsets = lines
    words: list[str] = []
    first_line = 1
    skip_next = False
    line, counted = 1, 0  # the line of offset ``counted``
    try:
        for tok, start, punct in shell_tokens(strip_comments(flat)):
            line += text.count("\n", counted, start)
            counted = start
            # a run of operators (";\n", "&&\n", a blank line "\n\n") ends a command too
            if punct and tok not in REDIRECTS:
                if words:
                    yield words, first_line
                words = []
                continue
            if punct:  # a redirection: its target is not a word of the command
                if words and words[-1].isdigit():
                    words.pop()
                skip_next = True
                continue
            if skip_next:
                skip_next = False
                continue
            if not words:
                first_line = line
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
