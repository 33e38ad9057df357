"""Errors a user can cause or meet, each with the exit code the CLI returns.

Exit codes (documented in the README): 0 success; 1 a `check` gate failed; 2 usage or
input error (bad profile, unknown name, bad option). The observe subsystem adds its own
network codes in :mod:`spectune.observe`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2


class SpectuneError(Exception):
    """A problem the user can act on: printed as one line, never as a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class InputError(SpectuneError):
    """Bad input (a profile, a config file, an option value); exit code 2.

    ``where`` names the place: ``file:line: key.path``."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        if key:
            where += f"{key}: "
        super().__init__(where + message, EXIT_USAGE)
        self.file, self.line, self.key = file, line, key
