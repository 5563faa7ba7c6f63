"""A release is made only from a tag that is the project's version (tests/support/release.py);
the release itself is built in tests/e2e/test_image.py."""

from __future__ import annotations

import pytest

from taskfsm.tools.deploygen import project_version
from tests.support import release


def test_the_tag_is_the_project_version() -> None:
    assert release.version_of(f"v{project_version()}") == project_version()


@pytest.mark.parametrize(
    ("tag", "says"),
    [
        ("1.2.3", "is not v<major>.<minor>.<patch>"),
        ("v1.2", "is not v<major>.<minor>.<patch>"),
        ("v99.0.0", "bump the version in a commit, then tag that commit"),
    ],
)
def test_other_tags_are_refused_with_what_to_do(tag: str, says: str) -> None:
    with pytest.raises(release.ReleaseError, match=says):
        release.version_of(tag)


def test_a_tag_that_does_not_exist_is_refused() -> None:
    with pytest.raises(release.ReleaseError, match=r"no tag v0\.0\.0-absent in this repository"):
        release.check_checkout("v0.0.0-absent")
