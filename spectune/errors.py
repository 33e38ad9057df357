"""Errors a user can cause or meet, each with the exit code the CLI returns.

Exit codes live in one enum, :class:`spectune.exit_codes.ExitCode` (documented in the
README); the ``EXIT_*`` names below are that enum's members under their old names.
"""

from __future__ import annotations

from spectune.exit_codes import ExitCode

EXIT_OK = ExitCode.OK
EXIT_GATE_FAILED = ExitCode.GATE_FAILED
EXIT_USAGE = ExitCode.USAGE


class SpectuneError(Exception):
    """A problem the user can act on: printed as one line, never as a traceback."""

    exit_code: int = EXIT_USAGE

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
