"""``spectune observe LOG``: a vLLM server log (a file or stdin) read in bounded pieces and
handed to vLLM's log reader (:mod:`spectune.engines.vllm.log`: the line format and how lines are
summed into an Observation)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from spectune.base.errors import ObserveUsageError
from spectune.base.limits import MAX_LOG_BYTES, MAX_LOG_LINE
from spectune.documents.inputs import input_file_problem
from spectune.documents.observation import Observation
from spectune.engines.vllm.log import aggregate, parse_log


def _bounded_lines(stream: BinaryIO, where: str) -> Iterator[str]:
    """Lines of a binary stream as text (bad UTF-8 replaced), each read in pieces of at most
    MAX_LOG_LINE bytes, MAX_LOG_BYTES in all: /dev/zero or an endless pipe cannot grow
    memory or run forever."""
    total = 0
    while True:
        raw = stream.readline(MAX_LOG_LINE)
        if not raw:
            return
        total += len(raw)
        if total > MAX_LOG_BYTES:
            raise ObserveUsageError(f"{where}: more than {MAX_LOG_BYTES >> 30} GiB of log; give the "
                                    "part to observe (e.g. journalctl --since ...)")
        yield raw.decode("utf-8", errors="replace")


def observe_log(path: str | Path) -> Observation:
    """Read a vLLM server log (``-`` for stdin) and aggregate its SpecDecoding lines.
    The observation is checked as ``recommend --observed`` would load it."""
    from spectune.documents.observation import checked

    name = str(path)
    if name == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text-only stdin (embedding, tests)
            records, bad = parse_log(line[:MAX_LOG_LINE] for line in sys.stdin)
        else:
            records, bad = parse_log(_bounded_lines(stream, "stdin"))
        return checked(aggregate(records, "stdin", bad), ObserveUsageError)
    problem = input_file_problem(name)
    if problem:
        raise ObserveUsageError(f"cannot read log file: {problem}")
    try:
        with open(path, "rb") as fh:
            records, bad = parse_log(_bounded_lines(fh, name))
    except OSError as err:
        raise ObserveUsageError(f"cannot read log file {name}: {err.strerror}") from None
    return checked(aggregate(records, name, bad), ObserveUsageError)
