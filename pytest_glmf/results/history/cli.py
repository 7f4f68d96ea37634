"""`glmf history`: list stored runs per lane, a metric's trend (table, PNG), CSV export, and
re-import of result files.

    glmf history [list] [--lane L] [--last N]
    glmf history trend curve.ttft_p95_s [--lane L] [--key users=48] [--last N] [--plot OUT.png]
    glmf history export OUT.csv [--lane L]          (- for stdout)
    glmf history import DIR_OR_FILE...

`--store` (before or after the command) names the store as the plugin's --glmf-history does: a
SQLite file, sqlite:///PATH, postgresql://USER@HOST:PORT/DB; default $GLMF_HISTORY, else
glmf-results/history.sqlite. A store fault is one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from pytest_glmf.results.gatejson import NotAGateOutput, as_result_document
from pytest_glmf.results.history import queries
from pytest_glmf.results.history.connect import open_store
from pytest_glmf.results.history.schema import NotAResultFile
from pytest_glmf.results.history.store import FORMS, HistoryError, SqlStore, parse_location

DEFAULT_RESULTS = "glmf-results"


def _parser() -> argparse.ArgumentParser:
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", default=argparse.SUPPRESS,
                       help=f"history store: {FORMS} (default: $GLMF_HISTORY, else {DEFAULT_RESULTS}/history.sqlite)")
    ap = argparse.ArgumentParser(prog="glmf history", parents=[store],
                                 description="Stored runs per lane, metric trends, CSV export, re-import.")
    sub = ap.add_subparsers(dest="command")
    ls = sub.add_parser("list", parents=[store], help="runs per lane: image, engine, model revision, GPU, verdict")
    ls.add_argument("--lane")
    ls.add_argument("--last", type=int, default=20, metavar="N", help="newest N runs per lane (default 20)")
    ls.add_argument("--html", metavar="OUT.html", help="also write one HTML page: the runs and a trend chart per "
                                                      "metric, images on the x axis, failed runs marked")
    tr = sub.add_parser("trend", parents=[store], help="a metric per run, per lane (table; PNG with --plot)")
    tr.add_argument("metric", help="GATE.METRIC, e.g. curve.ttft_p95_s")
    tr.add_argument("--lane")
    tr.add_argument("--key", help="one recorded key, e.g. users=48 (default: every key)")
    tr.add_argument("--last", type=int, default=20, metavar="N", help="newest N runs per lane (default 20)")
    tr.add_argument("--plot", metavar="OUT.png", help="also write a PNG (needs pytest-glmf[plot])")
    tr.add_argument("--html", metavar="OUT.html", help="also write one HTML page with this metric's trend")
    ex = sub.add_parser("export", parents=[store], help="CSV, one row per run and metric")
    ex.add_argument("out", help="CSV file to write, - for stdout")
    ex.add_argument("--lane")
    im = sub.add_parser("import", parents=[store], help="store result files (a directory is searched recursively)")
    im.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    return ap


def _open(value: str | None, create: bool) -> SqlStore | None:
    location = parse_location(value, Path.cwd(), Path.cwd() / DEFAULT_RESULTS)
    if location is None:
        raise HistoryError("the history store is off; name one with --store")
    store = open_store(location, create=create)
    if store is None:
        raise HistoryError(f"no history store at {location.display} yet (sessions create it; "
                           "`glmf history import DIR` fills it from result files)")
    return store


def cli(argv: list[str]) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    command = args.command or "list"
    value = getattr(args, "store", None) or os.environ.get("GLMF_HISTORY") or None
    try:
        with _open(value, create=command == "import") as store:  # type: ignore[union-attr]
            if command == "import":
                return _import(store, [Path(p) for p in args.paths])
            if command == "trend":
                return _trend(store, args)
            if command == "export":
                return _export(store, args)
            runs = store.runs(lane=getattr(args, "lane", None))
            last, seen, kept = getattr(args, "last", 20), Counter[str](), []
            for r in runs:
                if seen[r.lane] < last:
                    kept.append(r)
                    seen[r.lane] += 1
            print(queries.runs_table(kept) if kept else f"no runs stored in {store.location.display}")
            if getattr(args, "html", None):
                return _html(store, args, metrics=None)
            return 0
    except (HistoryError, ValueError) as exc:
        print(f"glmf history: {exc}", file=sys.stderr)
        return 2


def _trend(store: SqlStore, args: argparse.Namespace) -> int:
    gate, metric = queries.parse_metric(args.metric)
    trends = queries.trend(store, gate, metric, lane=args.lane, key=args.key, last=args.last)
    if not trends:
        print(f"glmf history: no stored run recorded {args.metric}"
              + (f" on lane {args.lane}" if args.lane else "") + (f" for {args.key}" if args.key else ""),
              file=sys.stderr)
        return 2
    print(queries.trend_table(gate, metric, trends))
    if args.plot:
        try:
            queries.plot_trend(gate, metric, trends, args.plot)
        except RuntimeError as exc:
            print(f"glmf history: {exc}", file=sys.stderr)
            return 2
        print(f"\nplot written to {args.plot}")
    if args.html:
        return _html(store, args, metrics=[(gate, metric)])
    return 0


def _html(store: SqlStore, args: argparse.Namespace, metrics: list[tuple[str, str]] | None) -> int:
    """--html OUT.html: the runs of the lane (or every lane) and their trends as one page."""
    from pytest_glmf.results.html_blocks import write_page
    from pytest_glmf.results.html_pages import history_page

    page = history_page(store, lane=args.lane, last=args.last, metrics=metrics, key=getattr(args, "key", None))
    try:
        write_page(page, args.html)
    except OSError as exc:
        print(f"glmf history: {args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"HTML written to {args.html}")
    return 0


def _export(store: SqlStore, args: argparse.Namespace) -> int:
    if args.out == "-":
        queries.write_csv(store, sys.stdout, lane=args.lane)
        return 0
    with open(args.out, "w", newline="") as f:
        n = queries.write_csv(store, f, lane=args.lane)
    print(f"{n} row(s) written to {args.out}")
    return 0


def result_files(paths: list[Path]) -> list[Path]:
    """The JSON files under each path (directories recursively; part files and the `-latest`
    copies, which repeat a session's own file, left out)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*.json") if ".parts" not in f.parts and not f.name.endswith("-latest.json"))
        else:
            out.append(p)
    return out


def _import(store: SqlStore, paths: list[Path]) -> int:
    files = result_files(paths)
    sessions: dict[str, str] = {}
    skipped = []
    for f in files:
        try:
            doc = as_result_document(json.loads(f.read_text()), f)   # a glmf <gate> --json too
            row = store.add_run(doc, source=str(f.resolve()))
        except (OSError, json.JSONDecodeError, NotAResultFile, NotAGateOutput) as exc:
            skipped.append(f"{f}: {str(exc).removeprefix(f'{f}: ')}")
            continue
        sessions[row["session_id"]] = row["verdict"]
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    counts = {v: list(sessions.values()).count(v) for v in sorted(set(sessions.values()))}
    print(f"imported {len(sessions)} run(s) into {store.location.display}"
          + (f" ({', '.join(f'{n} {v}' for v, n in counts.items())})" if counts else "")
          + (f"; {len(skipped)} file(s) skipped (not pytest-glmf result files)" if skipped else ""))
    return 0 if sessions or not files else 2
