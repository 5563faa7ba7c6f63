"""Go duration strings: parsing like ``time.ParseDuration``, formatting like ``Duration.String``."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskfsm.api.duration import (
    GO_DURATION_PATTERN,
    format_go_duration,
    parse_go_duration,
    to_timedelta,
)

NS, US, MS, S, M, H = 1, 10**3, 10**6, 10**9, 60 * 10**9, 3600 * 10**9


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("0", 0),
        ("-0", 0),
        ("0s", 0),
        ("5s", 5 * S),
        ("1m30s", 90 * S),
        ("1.5h", 90 * M),
        ("-2h", -2 * H),
        ("+300ms", 300 * MS),
        ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
        ("10\u00b5s", 10 * US),
        ("10\u03bcs", 10 * US),
        (".5s", 500 * MS),
        ("1.s", S),
        ("1.0000000001s", S),
    ],
)
def test_parse(text: str, nanoseconds: int) -> None:
    assert parse_go_duration(text) == nanoseconds


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("-", "empty"),
        ("5", "missing unit"),
        ("5 s", "unknown unit"),
        ("5d", "unknown unit"),
        (".s", "expected a number"),
        ("1h.", "expected a number"),
        ("9999999999h", "out of range"),
    ],
)
def test_parse_rejects(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1100, "1.1\u00b5s"),
        (2_200_000, "2.2ms"),
        (3 * S + 300 * MS, "3.3s"),
        (3 * M, "3m0s"),
        (4 * M + 5 * S, "4m5s"),
        (H, "1h0m0s"),
        (5 * H + 6 * M + 7 * S + 1, "5h6m7.000000001s"),
        (-90 * S, "-1m30s"),
    ],
)
def test_format_like_go(nanoseconds: int, text: str) -> None:
    assert format_go_duration(nanoseconds) == text


@given(st.integers(-(2**63) + 1, 2**63 - 1))
def test_format_then_parse_is_identity(nanoseconds: int) -> None:
    assert parse_go_duration(format_go_duration(nanoseconds)) == nanoseconds


@given(st.from_regex(GO_DURATION_PATTERN, fullmatch=True))
def test_pattern_accepts_only_what_parses_barring_overflow(text: str) -> None:
    try:
        value = parse_go_duration(text)
    except ValueError as exc:
        message = str(exc)
        value = None
    if value is None:
        assert "out of range" in message
    else:
        assert parse_go_duration(format_go_duration(value)) == value


@given(st.text(alphabet="0123456789.+-nsuµμmh x", max_size=10))
def test_parser_rejects_what_the_pattern_rejects(text: str) -> None:
    if re.fullmatch(GO_DURATION_PATTERN, text) is None:
        with pytest.raises(ValueError, match="invalid duration"):
            parse_go_duration(text)


def test_to_timedelta() -> None:
    assert to_timedelta("1m30s") == timedelta(seconds=90)
    assert to_timedelta("-1500ns") == timedelta(microseconds=-1)
