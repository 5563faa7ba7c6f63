"""What a fixture's teardown may know about its test's outcome (tests/conftest.py sets it)."""

from __future__ import annotations

import pytest

FAILED = pytest.StashKey[bool]()
"""Set on a test item once its call phase has run: did it fail? (Fixtures that started controller
processes print their log tails when it did.)"""
