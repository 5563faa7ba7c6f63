"""`taskfsm run --finished-ttl` (docs/operations.md, "Retention"): what it accepts, and its
default (0: keep everything). tests/e2e/test_retention.py runs the flag in a controller."""

from __future__ import annotations

import argparse

import pytest

from taskfsm import defaults
from taskfsm.cli import build_parser
from taskfsm.cli.run import parse_ttl


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("3600", 3600.0),
        ("1.5", 1.5),
        ("90m", 5400.0),
        ("168h", 604800.0),
        ("1h30m", 5400.0),
        ("25s", 25.0),
    ],
)
def test_seconds_and_go_durations_are_accepted(text: str, seconds: float) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["-1", "-5m", "a week", "", "nan", "inf", "5d"])
def test_negative_or_unreadable_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_ttl(text)


def test_the_default_keeps_everything_and_the_flag_parses() -> None:
    parser = build_parser()
    assert parser.parse_args(["run"]).finished_ttl == defaults.FINISHED_TTL == 0.0
    assert parser.parse_args(["run", "--finished-ttl=2h"]).finished_ttl == 7200.0
