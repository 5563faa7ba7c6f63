"""The run-comparison tool reads JUnit XML files, sums test time per tier and names the tests
whose duration varies more than x3 between runs (tests/support/durations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import durations

CASES = """<testsuites><testsuite>
<testcase classname="tests.unit.test_a" name="test_one" time="{a}"/>
<testcase classname="tests.e2e.test_b" name="test_two[x]" time="{b}"/>
</testsuite></testsuites>"""


def test_tiers_and_spread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for i, (a, b) in enumerate([(0.2, 10.0), (0.9, 40.0), (0.3, 12.0)]):
        path = tmp_path / f"run{i}.xml"
        path.write_text(CASES.format(a=a, b=b))
        runs.append(str(path))
    assert durations.durations(Path(runs[0])) == {
        "tests/unit/test_a::test_one": 0.2,
        "tests/e2e/test_b::test_two[x]": 10.0,
    }
    assert durations.main(runs) == 0
    out = capsys.readouterr().out
    assert "| e2e | 1 | 10 | 40 | 12 |" in out
    assert "| unit | 1 | 0 | 1 | 0 |" in out
    # The unit test varies x4.5 but stays under a second; the e2e test varies x4.
    assert "more than x3 between runs: 1" in out
    assert "x4.0 tests/e2e/test_b::test_two[x]: 10.0, 40.0, 12.0" in out
