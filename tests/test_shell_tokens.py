"""The shell reader behind `spectune check` (spectune.engines.shell): the same tokens as POSIX
shlex, each with its offset, in time linear in the text -- a command line of 200,000
options is read whole, its speculative settings and line numbers right."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectune.base.errors import InputError
from spectune.engines.serving_config import read_serving_config
from spectune.engines.shell import PUNCTUATION, scan_shell, shell_commands, shell_tokens


def shlex_tokens(text: str) -> list[str]:
    """What shell_commands read with before: shlex, posix, punctuation characters split."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=PUNCTUATION)
    lex.whitespace = " \t\r"
    lex.commenters = ""
    lex.whitespace_split = False
    return list(lex)


# letters, word punctuation, quotes, escapes, operators, characters shlex emits alone
# (`$`, `{`, `,`, a non-Latin letter), whitespace shlex does not skip
ALPHABET = "ab9-=./~*?_é ;&|()<>\n\t\r'\"\\${},:→\x0b"


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_tokens_are_shlexs(text: str) -> None:
    try:
        expected: list[str] | str = shlex_tokens(text)
    except ValueError as exc:
        expected = str(exc)
    try:
        got: list[str] | str = [tok for tok, _, _ in shell_tokens(text)]
    except ValueError as exc:
        got = str(exc)
    assert got == expected


def scan_by_hand(text: str) -> tuple[list[tuple[int, int]], int]:
    """spectune.engines.shell.scan_shell as it was, a character at a time: the reference."""
    comments: list[tuple[int, int]] = []
    quote, last_quote, i = None, 0, 0
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


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=ALPHABET + "#", max_size=40))
def test_comments_and_quotes_are_found_as_by_hand(text: str) -> None:
    assert scan_shell(text) == scan_by_hand(text)


def test_offsets_are_where_tokens_start() -> None:
    text = "vllm  serve\t'm x' a\"b\"c;\n--x=1 \\$y"
    assert [(tok, start) for tok, start, _ in shell_tokens(text)] == [
        ("vllm", 0), ("serve", 6), ("m x", 12), ("abc", 18), (";\n", 23), ("--x=1", 25), ("$y", 31)]


def test_lines_of_commands() -> None:
    text = "# setup\necho 'a\nb'\n\nvllm serve m \\\n  --tp 2\nsglang serve x\n"
    assert list(shell_commands(text, "f")) == [(["echo", "a\nb"], 2),
                                               (["vllm", "serve", "m", "--tp", "2"], 5),
                                               (["sglang", "serve", "x"], 7)]
    with pytest.raises(InputError, match=r"f:3: cannot parse the shell text"):
        list(shell_commands("a\nb\nc 'open\n", "f"))


N = 200_000


def test_a_command_of_200000_options_is_read_whole(tmp_path: Path) -> None:
    """Quadratic before (each token's line counted from the start of the text): minutes.
    Every option is read: the speculative config after the 200,000 others is found, and a
    second command's line number is right."""
    filler = "".join(f"--opt-{i} {i} \\\n" for i in range(N))
    f = tmp_path / "run.sh"
    f.write_text("#!/bin/sh\nvllm serve m \\\n" + filler + "  --speculative-config "
                 "'{\"method\": \"ngram\", \"num_speculative_tokens\": 5}'\n"
                 "vllm serve other\n")
    conf = read_serving_config(str(f))
    assert conf.gamma == 5 and conf.method == "ngram" and conf.line == 2
    assert "2 engine commands found; checked the first (line 2)" in conf.warnings
    cmds = list(shell_commands(f.read_text(), str(f)))
    assert [line for _, line in cmds] == [2, N + 4]
    assert len(cmds[0][0]) == 3 + 2 * N + 2


def test_a_word_of_a_million_characters_is_one_token() -> None:
    """shlex grows a token a character at a time (quadratic); the reader is linear."""
    word = "x" * 1_000_000
    assert list(shell_commands(f"vllm serve '{word}' \"{word}\" {word}", "f")) == \
        [(["vllm", "serve", word, word, word], 1)]
