"""One duration parser (spectune/documents/durations.py): the same grammar for every duration
a user types, a bare number's unit stated by each call site (seconds for windows,
milliseconds for --tpot-slo), and a JSON Schema pattern that accepts what the parser does."""

from __future__ import annotations

import re

import pytest

from spectune.base.errors import InputError, ObserveUsageError
from spectune.documents.durations import PATTERN, parse_duration, tpot_seconds, window_seconds

GOOD = ["90", "90.", ".5", "1e3", "20s", "5m", "1h30m", "500ms", "1d", "2w", "25000us", "25µs", "25 ms",
        "1e-3s", " 5m ", "1H", "25MS"]
BAD = ["", "5x", "1h 5m", "-3s", "+5", "1_000", "nan", "inf", "infs", "s", "5m-", "m5", "1..5s", "1e", "1,5s"]


@pytest.mark.parametrize("text", GOOD)
def test_the_schema_pattern_accepts_what_the_parser_reads(text: str) -> None:
    assert parse_duration(text) > 0
    assert re.search(PATTERN, text)


@pytest.mark.parametrize("text", BAD)
def test_the_schema_pattern_refuses_what_the_parser_refuses(text: str) -> None:
    with pytest.raises(ObserveUsageError):
        parse_duration(text)
    assert not re.search(PATTERN, text)


def test_a_bare_number_is_in_the_unit_each_call_site_states() -> None:
    assert parse_duration("90") == 90.0 and parse_duration("90", bare="ms") == pytest.approx(0.09)
    assert window_seconds("90") == 90.0  # --window, --interval, a fleet file's window: seconds
    assert tpot_seconds("25") == pytest.approx(0.025)  # --tpot-slo: milliseconds (slo.tpot_ms)
    # with a unit, both read the same
    assert window_seconds("1.5s") == tpot_seconds("1500ms") == pytest.approx(1.5)


def test_each_call_site_keeps_its_bounds() -> None:
    with pytest.raises(ObserveUsageError, match=r"between 0\.1 s and 604800 s"):
        window_seconds("50ms")
    with pytest.raises(InputError, match="at most 1000 s"):
        tpot_seconds("1001s")
    assert tpot_seconds("1000s") == 1000.0
