"""``taskfsm ui`` as a user runs it, and the headless Chromium that looks at it.

* :class:`UiProcess` starts ``taskfsm ui`` (the console script of this environment) with a given
  kubeconfig and flags, reads the URL it prints, and stops it (SIGTERM, then SIGKILL);
* :func:`launch_chromium` starts Debian's Chromium (``/usr/bin/chromium``, installed by
  scripts/setup.sh) through Playwright, never a browser Playwright downloads, with the flags a
  machine without network and without a display needs. A missing Chromium fails loudly.

Screenshots go to :func:`artefact_dir` (``$TASKFSM_TEST_ARTEFACTS``, default
``test-artefacts/`` in the repository, ignored by git).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from taskfsm_dev.controlplane import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def artefact_dir(*parts: str) -> Path:
    root = Path(os.environ.get("TASKFSM_TEST_ARTEFACTS") or REPO_ROOT / "test-artefacts")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, through ``playwright`` (a started sync_playwright())."""
    if not CHROMIUM.is_file():
        raise RuntimeError(
            f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium package"
        )
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


class UiProcess:
    """``taskfsm ui ARGS...`` with ``KUBECONFIG=kubeconfig``; ``url`` once it serves."""

    def __init__(self, kubeconfig: Path | str, *args: str, timeout: float = 60.0) -> None:
        script = Path(sys.executable).parent / "taskfsm"
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.proc = subprocess.Popen(
            [str(script), "ui", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self.stderr_text = ""

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        try:
            first = lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise RuntimeError(
                f"taskfsm ui printed nothing in {timeout}s: {self.stderr_text}"
            ) from None
        if not first.startswith("taskfsm ui: http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"unexpected first line {first!r}: {self.stderr_text}")
        self.first_line = first.rstrip("\n")
        self.url = first.split()[2].rstrip("/")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr_text = self.proc.stderr.read()[-4000:]
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode

    def __enter__(self) -> UiProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
