"""The `glmf` command (placeholder until the plugin-core work lands)."""


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("glmf: not implemented yet")
