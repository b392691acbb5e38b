"""TUI tests: every test gets its own progress dir (MEMLAB_HOME), never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def memlab_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "memlab-home"
    monkeypatch.setenv("MEMLAB_HOME", str(home))
    return home
