"""What pytest-glmf reads of a release (upgrade/coverage.py), on a release written here: a line the release now
prints that the gate does not read is the plugin's gap, one per fact, until a gate pattern reads it."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_upgrade_cli import surface

from pytest_glmf.gates.boot import vllm as boot_vllm
from pytest_glmf.upgrade.coverage import PRINTS, boot_gaps

OVERRIDE_034 = next(p for p in PRINTS["vllm"] if p.fact == "active_seqs_override")


def release(root: Path, *, override_034: bool) -> Path:
    """A vllm package that prints every line the gate reads (one file), and 0.34's override where asked."""
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "printed.py").write_text(surface())
    fmt = OVERRIDE_034.skeleton.replace("{}", "%s")
    (root / "vllm" / "config" / "vllm.py").write_text(
        "import logging\nlogger = logging.getLogger(__name__)\n"
        + (f"def override():\n    logger.info({fmt!r}, 'DFlash', 64, 8192, 80, 64)\n" if override_034 else ""))
    return root


def test_a_release_printing_only_what_the_gate_reads_has_no_gap(tmp_path: Path) -> None:
    assert boot_gaps("vllm", release(tmp_path, override_034=False)) == {}


def test_a_new_line_the_gate_does_not_read_is_a_gap_until_a_pattern_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = release(tmp_path, override_034=True)
    gaps = boot_gaps("vllm", package)
    assert list(gaps) == ["active_seqs_override"]
    assert gaps["active_seqs_override"]["detail"].startswith("vllm/config/vllm.py: 'The {} draft pass fits at most {} "
                                                             "requests within")
    reads_it = boot_vllm._line("active_seqs_override_fit", r"The (?P<method>\S+) draft pass fits at most (?P<new>\d+) "
                               r"requests within max_num_batched_tokens=(?P<batched>\d+)\.")
    monkeypatch.setitem(boot_vllm.VLLM_LINES, reads_it.name, reads_it)
    assert boot_gaps("vllm", package) == {}
