"""``taskfsm run`` / ``demo`` end the process with their exit code even while library daemon
threads still run (regression: a graceful SIGTERM stop once exited -6, SIGABRT, during
interpreter finalization after "controller stopped" was logged)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, sys, threading, time
    from taskfsm.cli.run import exit_after_stop

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    log = logging.getLogger("busy")

    def chatter():  # a thread that is writing to stderr when the process ends
        while True:
            log.info("still watching " + "x" * 500)

    def sleeper():  # a thread that wakes up after the main thread is gone
        while True:
            time.sleep(0.001)

    for target in (chatter, chatter, sleeper, sleeper):
        threading.Thread(target=target, daemon=True).start()
    time.sleep(0.2)
    print("buffered line before the exit", end="")  # no newline: only a flush writes it
    logging.getLogger("main").info("controller stopped")
    exit_after_stop(int(sys.argv[1]))
    """
)


def run(code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_exit_code_is_kept_while_daemon_threads_still_run():
    for code in (0, 1, 0, 3, 0):
        result = run(code)
        assert result.returncode == code, result.stderr[-2000:]


def test_output_written_before_the_exit_is_flushed():
    result = run(0)
    assert result.stdout == "buffered line before the exit"
    assert "controller stopped" in result.stderr
