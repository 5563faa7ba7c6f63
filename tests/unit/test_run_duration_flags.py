"""`taskfsm run`'s duration flags take seconds or Go durations (15s, 2m, 1h30m), as the Go
controller's flags do; anything else is a usage error naming the value."""

from __future__ import annotations

import argparse

import pytest

from taskfsm.cli import build_parser
from taskfsm.flagdoc import run_parser

DURATION_FLAGS = (
    "--leader-election-lease-duration",
    "--leader-election-renew-deadline",
    "--leader-election-retry-period",
    "--resync-period",
    "--cleanup-timeout",
    "--orphan-sweep-period",
    "--api-error-max-backoff",
    "--watch-timeout",
    "--watch-read-margin",
    "--watch-max-backoff",
    "--shutdown-timeout",
    "--cache-sync-timeout",
    "--job-pods-refused-timeout",
)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


def dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


@pytest.mark.parametrize("flag", DURATION_FLAGS)
def test_duration_flags_take_seconds_and_go_durations(flag):
    assert getattr(parse(f"{flag}=90"), dest(flag)) == 90.0
    assert getattr(parse(f"{flag}=1.5"), dest(flag)) == 1.5
    assert getattr(parse(f"{flag}=15s"), dest(flag)) == 15.0
    assert getattr(parse(f"{flag}=2m"), dest(flag)) == 120.0
    assert getattr(parse(f"{flag}=1h30m"), dest(flag)) == 5400.0
    assert getattr(parse(f"{flag}=500ms"), dest(flag)) == 0.5


def test_every_float_flag_of_run_is_a_duration_flag():
    """No seconds flag of `taskfsm run` is left taking plain numbers only."""
    parser = run_parser(build_parser())
    typed = {
        a.option_strings[0]
        for a in parser._actions
        if getattr(a.type, "__name__", "") in ("_seconds", "float")
    }
    assert typed == set(DURATION_FLAGS)


def test_job_ttl_takes_whole_seconds_in_either_form():
    assert parse("--job-ttl-seconds=3600").job_ttl_seconds == 3600
    assert parse("--job-ttl-seconds=1h").job_ttl_seconds == 3600


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resync-period=soon"], "not a duration: 'soon'"),
        (["--watch-timeout=5x"], "not a duration: '5x'"),
        (["--job-ttl-seconds=1.5s"], "not a whole number of seconds: '1.5s'"),
    ],
)
def test_a_bad_duration_is_a_usage_error_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
