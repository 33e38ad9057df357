"""Errors a user can cause or meet, each with the exit code the CLI returns.

Exit codes live in one enum, :class:`spectune.base.exit_codes.ExitCode` (documented in the
README); the ``EXIT_*`` names below are that enum's members under their old names.

Faults of observing a server (``spectune observe``, ``--metrics-url``, ``--prometheus``):

The CLI prints ``spectune: error: <message>`` on stderr and exits with the code; the
messages are one line and never contain a credential (see :mod:`spectune.base.redact`).

=====  ==================================  =================================================
code   exception                           meaning
=====  ==================================  =================================================
2      :class:`ObserveUsageError`          bad option, several models and no --model-name,
                                           unreadable --observed / --log file
3      :class:`ConnectionFault`            connection refused, reset or host unreachable
4      :class:`HTTPStatusFault`            the server answered 4xx/5xx (after retries for 5xx), or
                                           redirected to another host (not followed)
5      :class:`BadBodyFault`               the body is not Prometheus text (HTML, JSON, empty),
                                           or malformed / inconsistent (a Prometheus answer too)
6      :class:`NoSpeculativeTraffic`       speculation is set up but made no drafts in the window
7      :class:`SpeculationNotEnabled`      no spec-decode metrics at all (or not an LLM server)
8      :class:`DNSFault`                   the host name does not resolve
9      :class:`TimeoutFault`               no complete answer within --timeout (after retries)
10     :class:`TLSFault`                   TLS handshake or certificate verification failed
=====  ==================================  =================================================
"""

from __future__ import annotations

from spectune.base.exit_codes import ExitCode

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


EXIT_CONNECTION = ExitCode.CONNECTION
EXIT_HTTP_STATUS = ExitCode.HTTP_STATUS
EXIT_BAD_BODY = ExitCode.BAD_BODY
EXIT_NO_SPEC_TRAFFIC = ExitCode.NO_SPEC_TRAFFIC
EXIT_SPEC_DISABLED = ExitCode.SPEC_DISABLED
EXIT_DNS = ExitCode.DNS
EXIT_TIMEOUT = ExitCode.TIMEOUT
EXIT_TLS = ExitCode.TLS


class ObserveError(SpectuneError):
    """Base of every ``observe`` fault; ``exit_code`` is set per subclass."""

    exit_code = EXIT_USAGE


class ObserveUsageError(ObserveError):
    """Bad input: option values, ambiguous model, an unreadable observation or log file."""

    exit_code = EXIT_USAGE


class ConnectionFault(ObserveError):
    """TCP connection refused, reset, or the host is unreachable."""

    exit_code = EXIT_CONNECTION


class HTTPStatusFault(ObserveError):
    """The server answered with an HTTP error status (4xx, or 5xx after retries)."""

    exit_code = EXIT_HTTP_STATUS


class BadBodyFault(ObserveError):
    """The answer is not the Prometheus text exposition format."""

    exit_code = EXIT_BAD_BODY


class NoSpeculativeTraffic(ObserveError):
    """Speculative decoding is configured, but no draft was verified in the window."""

    exit_code = EXIT_NO_SPEC_TRAFFIC


class SpeculationNotEnabled(ObserveError):
    """The server exposes no speculative-decoding metrics at all."""

    exit_code = EXIT_SPEC_DISABLED


class DNSFault(ObserveError):
    """The host name in the URL does not resolve."""

    exit_code = EXIT_DNS


class TimeoutFault(ObserveError):
    """No complete answer within the timeout, on every attempt."""

    exit_code = EXIT_TIMEOUT


class TLSFault(ObserveError):
    """TLS handshake or certificate verification failed."""

    exit_code = EXIT_TLS


#: (exit code, exception, one-line meaning), for ``--help`` and the README.
EXIT_CODES: tuple[tuple[int, type[ObserveError], str], ...] = (
    (EXIT_USAGE, ObserveUsageError, "usage or input error (bad option, several models and no "
                                    "--model-name, unreadable file)"),
    (EXIT_CONNECTION, ConnectionFault, "connection refused, reset or unreachable"),
    (EXIT_HTTP_STATUS, HTTPStatusFault, "HTTP error status (4xx; 5xx after retries), or a redirect "
                                        "to another host refused"),
    (EXIT_BAD_BODY, BadBodyFault, "body is not Prometheus text (HTML, JSON, empty, garbage), or a "
                                  "malformed or inconsistent answer (e.g. more accepted than drafted)"),
    (EXIT_NO_SPEC_TRAFFIC, NoSpeculativeTraffic, "speculation enabled, but no drafts in the window"),
    (EXIT_SPEC_DISABLED, SpeculationNotEnabled, "no speculative-decoding metrics at all"),
    (EXIT_DNS, DNSFault, "host name does not resolve"),
    (EXIT_TIMEOUT, TimeoutFault, "no complete answer within --timeout (after retries)"),
    (EXIT_TLS, TLSFault, "TLS handshake or certificate verification failed"),
)

