"""Live progress lines for measurements that take minutes (curve rows, capacity searches): written
through pytest's terminal reporter, outside output capture, so they show while the test runs."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_glmf.text import fold


def live_progress(config: pytest.Config) -> Callable[[str], None] | None:
    """A `say(line)` that writes an indented line to the terminal now, folded at 120 columns (a
    table row and an error line whole: `fold`); None without a terminal."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def say(line: str) -> None:
        text = fold("  " + line)
        if capman is None:
            reporter.write_line(text)
            return
        with capman.global_and_fixture_disabled():
            reporter.write_line(text)
    return say
