"""The census of SGLang 0.5.23's fact-carrying boot lines (tests/contract/boot_census.py) against the
released source and against the boot parser.

- Every format string of the scanned source that mentions a fact's keyword is in the census, and
  every census entry is in the source: a new version's new or changed line fails here, naming the
  file and line, instead of silently giving a boot gate no fact.
- Each census reading, rendered with its sample values into a one-line log, gives exactly its facts
  through `parse_boot_log` (and a "carries none" line gives none). This part needs no oracle.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from boot_census import CENSUS, HERE, KEYWORDS, SCOPE, Entry, Reading, census_problems, scan
from sources import logged_formats, skeleton_regex

from pytest_glmf.engine import logformats as lf
from pytest_glmf.gates.boot.facts import BootFacts
from pytest_glmf.gates.boot.parse import parse_boot_log

pytestmark = pytest.mark.contract

EMPTY = BootFacts(engine="sglang", log_read=True).to_dict()


def line_facts(text: str) -> dict:
    """The facts one line gives: the keys (besides `engine`) that differ from an empty SGLang log's."""
    got = parse_boot_log(f"[2026-10-30 10:00:00 TP0] {text}\n").to_dict()
    assert got["engine"] == "sglang", text
    return {k: v for k, v in got.items() if k != "engine" and v != EMPTY[k]}


READINGS = [(e, r) for e in CENSUS for r in e.readings]


@pytest.mark.parametrize(("entry", "reading"), READINGS,
                         ids=[f"{e.source.rsplit('/', 1)[1]}:{e.render(r)[:60]}" for e, r in READINGS])
def test_each_census_line_gives_its_facts(entry: Entry, reading: Reading) -> None:
    assert entry.skeleton.count("{}") == len(reading.sample), "one sample value per {}"
    assert KEYWORDS.search(entry.skeleton), "a census line mentions a fact's keyword"
    if not reading.facts:
        assert reading.why_none, "a line that carries no fact says why"
    rendered = entry.render(reading)
    assert line_facts(rendered) == reading.facts, f"census line of {entry.source}: {rendered!r}"


def test_the_census_has_one_entry_per_format() -> None:
    keys = [(e.source, e.skeleton) for e in CENSUS]
    assert len(keys) == len(set(keys))
    assert all(e.source.startswith(SCOPE) for e in CENSUS)
    # the two lines issue 22 found the parser getting wrong are among them, with facts
    assert {e.source for e in CENSUS if any(r.facts for r in e.readings)} >= {
        "sglang/srt/mem_cache/unified_memory_pool.py",
        "sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py"}


def test_the_census_covers_the_released_source(sglang_package: Path) -> None:
    files, found = scan(sglang_package.parent)
    assert len(files) > 100 and len(found) >= len(CENSUS) - 1
    problems = census_problems(files, found)
    assert problems == [], "\n".join(problems)


SUMMARY_FILE = "sglang/srt/managers/scheduler.py"


def test_a_changed_format_string_fails_the_census_naming_file_and_line(sglang_package: Path, tmp_path: Path) -> None:
    """A copy of the scheduler whose summary line says `context_length=` (as a new version might): the
    census names the new line, where it is, and the entry the source no longer has."""
    source = (sglang_package.parent / SUMMARY_FILE).read_text()
    assert source.count('f"context_len={self.model_config.context_len}, "') == 1
    copy = tmp_path / SUMMARY_FILE
    copy.parent.mkdir(parents=True)
    copy.write_text(source.replace('f"context_len={self.model_config.context_len}, "',
                                   'f"context_length={self.model_config.context_len}, "'))
    for other in SCOPE:
        (tmp_path / other).mkdir(parents=True, exist_ok=True)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if 'f"max_total_num_tokens={' in text) - 1
    files, found = scan(tmp_path)
    mine = tuple(e for e in CENSUS if e.source == SUMMARY_FILE)
    new = ("max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={}, max_running_requests={}, "
           "context_length={}, {}={} GB")
    assert census_problems(files, found, mine) == [
        f"new boot line in {SUMMARY_FILE}:{line}: {new!r}: add it to the census ({HERE})",
        f"census entry no longer in {SUMMARY_FILE}: {mine[0].skeleton!r}: remove it from the census ({HERE}) "
        "or pin the new format"]


def test_a_new_fact_line_fails_the_census(sglang_package: Path, tmp_path: Path) -> None:
    """A logging call added to a pool file (a literal, a %-format through a name) is a new boot line."""
    src = "sglang/srt/mem_cache/kv_cache_configurator.py"
    copy = tmp_path / src
    copy.parent.mkdir(parents=True)
    shutil.copy(sglang_package.parent / src, copy)
    with copy.open("a") as out:
        out.write('\n\ndef _log_budget(n):\n    msg = "KV budget: max_total_num_tokens=%d" % n\n    logger.info(msg)\n')
    files, found = scan(tmp_path)
    problems = census_problems(files, found, tuple(e for e in CENSUS if e.source == src))
    n_lines = len(copy.read_text().splitlines())
    assert problems == [f"new boot line in {src}:{n_lines}: 'KV budget: max_total_num_tokens={{}}': add it to the "
                        f"census ({HERE})"]


HELD_OUT = Path(__file__).parents[1] / "gates" / "boot" / "bootlogs_0_5_23"
_PREFIX = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: [^\]]*)?\] ")
_UVICORN = "INFO:     "   # uvicorn's own lines, not SGLang's format strings


def test_the_held_out_logs_are_in_the_released_formats(sglang_package: Path) -> None:
    """Every SGLang line of tests/gates/boot/bootlogs_0_5_23 is an instance of a format string of the
    released package (one with at least 12 characters of literal text, so `{}` alone matches nothing)."""
    parent = sglang_package.parent
    files = [p for scope in SCOPE for p in sorted((parent / scope).rglob("*.py"))]
    files += [parent / fmt.source for fmt in lf.FORMATS[lf.V0_5_23].values() if fmt.source]
    skeletons = {sk for path in set(files) for _, sk in logged_formats(path) if len(sk.replace("{}", "")) >= 12}
    # (the longest literal piece of each, to try only the formats whose text the line has)
    anchored = [(max(sk.replace("{{", "{").replace("}}", "}").split("{}"), key=len), skeleton_regex(sk))
                for sk in skeletons]
    unmatched = []
    for log in sorted(HELD_OUT.glob("*.log")):
        for no, raw in enumerate(log.read_text().splitlines(), 1):
            if raw.startswith("# source:"):
                continue
            prefix = _PREFIX.match(raw)
            assert prefix, f"{log.name}:{no}: no SGLang prefix"
            msg = raw[prefix.end():]
            if not msg.startswith(_UVICORN) and not any(a in msg and p.match(msg) for a, p in anchored):
                unmatched.append(f"{log.name}:{no}: {msg}")
    assert unmatched == []


def test_logged_formats_reads_every_way_a_message_is_written(tmp_path: Path) -> None:
    source = tmp_path / "pool.py"
    source.write_text('''\
import logging
logger = logging.getLogger(__name__)
GB = 1 << 30

def init(n, size, dtype):
    logger.info(f"KV Cache {'VA upper bound' if n else 'is allocated'}. dtype: {dtype}, "
                f"#tokens: {n}, KV size: {size / GB:.2f} GB")
    logger.warning("max_running_requests is capped to %d by the mamba state "
                   "cache (max_mamba_cache_size=%d)", n, size)
    logger.info("mamba slots: {} of {n}".format(n, n=n))
    logger.info("total_bytes=%d, " % size + "max_num_reqs=%d" % n)
    msg = f"Decode batch, #running-req: {n}"
    logger.debug(msg)

    def inner():
        msg = "inner: max_total_num_tokens=%d"
        log_info_on_rank0(logger, msg % n)
        helper = lambda: logger.error("in a lambda: bs=%s", n)  # noqa: E731
        return helper
    print("not a log line: max_running_requests=%d" % n)
    logging.getLogger("x").info(str(n))
''')
    assert list(logged_formats(source)) == [
        (6, "KV Cache {}. dtype: {}, #tokens: {}, KV size: {} GB"),
        (8, "max_running_requests is capped to {} by the mamba state cache (max_mamba_cache_size={})"),
        (10, "mamba slots: {} of {}"),
        (11, "total_bytes={}, max_num_reqs={}"),
        (13, "Decode batch, #running-req: {}"),
        (17, "inner: max_total_num_tokens={}"),
        (18, "in a lambda: bs={}"),
    ]
