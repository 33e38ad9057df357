"""Every exit code spectune returns, in one enum (documented in the README).

0-10 keep the meanings they have had since the first release; 70 is ``EX_SOFTWARE`` of
BSD's ``sysexits.h``: an internal error (a bug), never a verdict. A CI job can therefore
trust that 1 means "the gate failed" and nothing else. (No imports: read before anything
heavy loads.)
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    GATE_FAILED = 1  # `spectune check`: the configuration leaves too much on the table
    USAGE = 2  # bad option, bad or mismatched input file (one line names file, line, key)
    CONNECTION = 3  # observe: connection refused, reset or unreachable
    HTTP_STATUS = 4  # observe: HTTP error status (after retries for 5xx, 408, 429)
    BAD_BODY = 5  # observe: the body is not Prometheus text, too large, or inconsistent
    NO_SPEC_TRAFFIC = 6  # observe: speculation on, no drafts in the window
    SPEC_DISABLED = 7  # observe: no speculative-decoding metrics at all
    DNS = 8  # observe: the host name does not resolve
    TIMEOUT = 9  # observe: no complete answer within --timeout (after retries)
    TLS = 10  # observe: TLS handshake or certificate verification failed
    INTERNAL = 70  # a bug in spectune: please report it
