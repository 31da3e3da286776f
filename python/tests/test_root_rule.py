"""Root tests skip with their reason when not root, and fail instead under RTEMU_REQUIRE_ROOT=1."""

from __future__ import annotations

import os

import pytest
from conftest import require_root, unique_lab


def test_not_root_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("RTEMU_REQUIRE_ROOT", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        require_root()


def test_not_root_fails_when_ci_requires_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("RTEMU_REQUIRE_ROOT", "1")
    with pytest.raises(pytest.fail.Exception, match="RTEMU_REQUIRE_ROOT=1 but needs root"):
        require_root()


def test_root_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("RTEMU_REQUIRE_ROOT", "1")
    require_root()


def test_lab_names_are_valid_and_unique() -> None:
    names = [unique_lab(t) for t in "abc" for _ in range(40)]
    assert len(set(names)) == len(names)
    assert all(
        1 <= len(n) <= 12 and set(n) <= set("abcdefghijklmnopqrstuvwxyz0123456789-") for n in names
    )
