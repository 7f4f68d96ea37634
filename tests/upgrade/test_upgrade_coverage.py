"""What pytest-glmf reads of a release (upgrade/coverage.py), on a release written here: a line the release now
prints that the gate does not read is the plugin's gap, one per fact, until a gate pattern reads it."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_upgrade_cli import surface

from pytest_glmf.gates.boot import vllm as boot_vllm
from pytest_glmf.upgrade.coverage import PRINTS, Printed, boot_gaps

# a rewording of the override that no gate pattern reads (a release after the newest tracked one)
REWORDED = Printed("active_seqs_override", "vllm/config/vllm.py",
                   "The {} drafter admits {} requests per step now. Lowering max_num_active_seqs from {} to {}.",
                   ("DFlash", 64, 80, 64))


def release(root: Path, *, prints: tuple[Printed, ...] = ()) -> Path:
    """A vllm package that prints every line the gate reads (one file), and `prints` beside them."""
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "printed.py").write_text(surface())
    calls = "".join(f"def said{i}():\n    logger.info({p.skeleton.replace('{}', '%s')!r}, "
                    f"{', '.join(map(repr, p.sample))})\n" for i, p in enumerate(prints))
    (root / "vllm" / "config" / "vllm.py").write_text("import logging\nlogger = logging.getLogger(__name__)\n" + calls)
    return root


def test_a_release_printing_only_what_the_gate_reads_has_no_gap(tmp_path: Path) -> None:
    assert boot_gaps("vllm", release(tmp_path)) == {}


def test_every_line_0_34_prints_that_feeds_a_fact_is_read_by_the_gate() -> None:
    """vLLM 0.34's reworded override and the KV pool and context settled after warmup: the boot gate
    reads each (gates/boot/vllm.py), so `glmf upgrade` reports no plugin gap for them."""
    patterns = [x.pattern for x in boot_vllm.VLLM_LINES.values()]
    unread = [p.skeleton for p in PRINTS["vllm"] if not any(r.search(p.skeleton.format(*p.sample)) for r in patterns)]
    assert unread == []


def test_a_new_line_the_gate_does_not_read_is_a_gap_until_a_pattern_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PRINTS, "vllm", [*PRINTS["vllm"], REWORDED])
    package = release(tmp_path, prints=(REWORDED,))
    gaps = boot_gaps("vllm", package)
    assert list(gaps) == ["active_seqs_override"]
    assert gaps["active_seqs_override"]["detail"].startswith("vllm/config/vllm.py: 'The {} drafter admits {} "
                                                             "requests per step now.")
    reads_it = boot_vllm._line("active_seqs_override_next", r"The (?P<method>\S+) drafter admits (?P<new>\d+) "
                               r"requests per step now\.")
    monkeypatch.setitem(boot_vllm.VLLM_LINES, reads_it.name, reads_it)
    assert boot_gaps("vllm", package) == {}
