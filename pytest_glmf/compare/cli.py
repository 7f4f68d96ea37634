"""`glmf compare RESULT... [--metric M] [--crossover A,B] [--markdown OUT] [--plot OUT.png]`: the
comparison of result files from one session or several (the same report a multi-lane run prints)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_glmf.compare.judge import direction_of


def cli(argv: list[str]) -> int:
    from pytest_glmf.compare.report import comparison_markdown, comparison_report, lane_curves, plot_lanes
    from pytest_glmf.results.gatejson import read_result  # a result file or a glmf <gate> --json output

    ap = argparse.ArgumentParser(prog="glmf compare", description="Compare lanes' result files: users as rows, "
                                 "lanes as columns, the crossover of each pair, the boot facts side by side.")
    ap.add_argument("results", nargs="+", metavar="RESULT", help="result files (one per lane; two at least)")
    ap.add_argument("--metric", default="per_user_tok_s", help="curve metric the crossover is judged on "
                                                               "(default: per_user_tok_s)")
    ap.add_argument("--crossover", metavar="A,B", help="also print only this pair's crossover sentence last")
    ap.add_argument("--markdown", metavar="OUT", help="write the comparison as Markdown (for a PR comment)")
    ap.add_argument("--plot", metavar="OUT.png", help="write a PNG with each lane's curve")
    ap.add_argument("--html", metavar="OUT.html", help="write the comparison as one self-contained HTML page")
    args = ap.parse_args(argv)
    try:
        direction_of(args.metric)
        docs = [read_result(p) for p in args.results]
    except ValueError as exc:
        print(f"glmf compare: {exc}", file=sys.stderr)
        return 2
    if len(docs) < 2:
        print("glmf compare: give two result files at least (one per lane)", file=sys.stderr)
        return 2
    print(comparison_report(docs, args.metric))
    if args.crossover:
        from pytest_glmf.compare.judge import judge

        curves = {c.name: c for c in lane_curves(docs)}
        pair = args.crossover.split(",")
        if len(pair) != 2 or any(n not in curves for n in pair):
            print(f"glmf compare: --crossover takes two lane names of the results, A,B; lanes: "
                  f"{', '.join(curves)}", file=sys.stderr)
            return 2
        print("\n" + judge(curves[pair[0]], curves[pair[1]], args.metric).sentence())
    if args.markdown:
        Path(args.markdown).write_text(comparison_markdown(docs, args.metric))
        print(f"\nmarkdown written to {args.markdown}")
    if args.plot:
        try:
            plot_lanes(docs, args.plot, args.metric)
        except (RuntimeError, ValueError) as exc:
            print(f"glmf compare: {exc}", file=sys.stderr)
            return 2
        print(f"plot written to {args.plot}")
    if args.html:
        from pytest_glmf.results.html_blocks import write_page
        from pytest_glmf.results.html_pages import comparison_page

        try:
            write_page(comparison_page(docs, args.metric), args.html)
        except OSError as exc:
            print(f"glmf compare: {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"HTML written to {args.html}")
    return 0
