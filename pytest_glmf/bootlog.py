"""Contract name (docs/architecture.md section 5): `pytest_glmf.bootlog.parse_boot_log(text) -> BootFacts`.
The parser lives with the boot gate, in `pytest_glmf.gates.boot.parse`."""
from pytest_glmf.gates.boot.parse import BootFacts, parse_boot_log

__all__ = ["BootFacts", "parse_boot_log"]
