"""The learner's feedback page for one notebook: per cell points, status and the exception's message only.

nbgrader's ``generate_feedback`` prints hidden tests in tracebacks, so the page is our own; every message
and the error go through ``nb_cells.scrub`` (no line of a hidden test, no ANSI colours, bounded length)
and are HTML-escaped.
"""
from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Sequence

from .nb_cells import scrub

if TYPE_CHECKING:
    from .notebooks import CellGrade

STYLE = """body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;width:100%}
td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}pre{white-space:pre-wrap;margin:0}
.pass td:nth-child(3){color:#1a7f37}.fail td:nth-child(3),.error td:nth-child(3){color:#cf222e}
.error{color:#cf222e}"""


def _row(c: CellGrade, hidden: set[str]) -> str:
    return (f"<tr class='{escape(c.status.replace(' ', '-'))}'><td>{escape(c.name)}</td>"
            f"<td>{c.points:g} / {c.max_points:g}</td><td>{escape(c.status)}</td>"
            f"<td><pre>{escape(scrub(c.message, hidden))}</pre></td></tr>")


def feedback_html(cells: Sequence[CellGrade], error: str | None, chapter: str, hidden: set[str]) -> str:
    """The whole page: a title with the total, the reason it was not graded (if so), a row per cell."""
    got = sum(c.points for c in cells)
    out = sum(c.max_points for c in cells)
    rows = "\n".join(_row(c, hidden) for c in cells)
    problem = f"<p class='error'><strong>Not graded:</strong> {escape(scrub(error, hidden))}</p>" if error else ""
    ch = escape(str(chapter))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Feedback: chapter {ch} notebook</title>
<style>{STYLE}</style></head><body>
<h1>Chapter {ch} notebook: {got:g} / {out:g} points</h1>
{problem}
<table><thead><tr><th>cell</th><th>points</th><th>status</th><th>what happened</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<p>Written answers marked "needs manual grading" are scored by your instructor later.</p>
</body></html>
"""
