"""Lanes compared: the recipe's comparison tables (users as rows, lanes as columns), the crossover
of two lanes judged from valid rows, and an assertion for users' own tests.

Public API (import it from here; the modules behind it may move):
    crossover(a, b, metric="per_user_tok_s", users=None) -> Crossover   .sentence(), .points, .excluded
    assert_lane_beats(a, b, metric="per_user_tok_s", users=None)        fails with the table of misses
    comparison_report(docs) -> str, comparison_markdown(docs) -> str, plot_lanes(docs, OUT.png)
A lane is a result file, its JSON document, a CurveResult or a LaneCurve. `glmf compare RESULT...`
prints the same report. In a test, the `glmf_lane_curve(name=None)` fixture (compare/fixture.py)
gives this lane's curve or another lane's (this session's, or its latest result file).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.compare.api import assert_lane_beats, crossover
    from pytest_glmf.compare.judge import Crossover
    from pytest_glmf.compare.lanecurve import LaneCurve
    from pytest_glmf.compare.report import comparison_markdown, comparison_report, plot_lanes

__all__ = ["Crossover", "LaneCurve", "assert_lane_beats", "comparison_markdown", "comparison_report", "crossover",
           "plot_lanes"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
