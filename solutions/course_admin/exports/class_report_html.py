"""The instructor's page of `course report`: one self-contained HTML file, its figures inline SVG.

Everything that comes from the table (learner ids, check names, messages, which learner code can shape)
is escaped; the page loads nothing from anywhere.
"""
from __future__ import annotations

from html import escape

from .class_summary import BINS, ChapterReport, ClassReport, Count

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: .5rem 0 1rem; } td, th { border: 1px solid #ccc; padding: .2rem .5rem; }
th { background: #f3f3f3; text-align: left; } td.n { text-align: right; } .who { color: #555; font-size: .9em; }
svg text { font: 11px system-ui, sans-serif; } h2 { border-top: 2px solid #ddd; padding-top: 1rem; }
"""
MAX_NAMES = 12


def _who(learners: list[str]) -> str:
    shown = ", ".join(escape(w) for w in learners[:MAX_NAMES])
    more = f" and {len(learners) - MAX_NAMES} more" if len(learners) > MAX_NAMES else ""
    return f'<span class="who">{shown}{more}</span>'


def histogram_svg(bins: list[int], max_points: float, width: int = 420, height: int = 170) -> str:
    """Learners per tenth of the chapter's points, as bars with their counts above them."""
    top = max(bins + [1])
    left, bottom, bar = 30, 30, (width - 40) / BINS
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="distribution of scores">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 5}" y2="{height - bottom}" stroke="#444"/>']
    for i, n in enumerate(bins):
        h = (height - bottom - 20) * n / top
        x, y = left + i * bar, height - bottom - h
        parts.append(f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{bar - 4:.1f}" height="{h:.1f}" fill="#4a7ab5">'
                     f'<title>{n} learner(s)</title></rect>')
        if n:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{n}</text>')
        parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 13}" text-anchor="middle">{i * 10}</text>')
    parts.append(f'<text x="{width / 2:.0f}" y="{height - 4}" text-anchor="middle">score, % of {max_points:g} '
                 'points (the last bar includes 100 %)</text></svg>')
    return "".join(parts)


def bars_svg(items: list[Count], total: int, width: int = 560) -> str:
    """One horizontal bar a check: the share of the chapter's graded learners who failed it."""
    row, label_w = 18, 230
    height = row * len(items) + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="checks failed most">']
    for i, c in enumerate(items):
        y = 3 + i * row
        w = (width - label_w - 40) * c.count / max(total, 1)
        name = c.name if len(c.name) <= 36 else c.name[:35] + "…"
        parts.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{escape(name)}</text>'
                     f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="#c0504d">'
                     f'<title>{c.count} of {total}</title></rect>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{c.count}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _counts_table(items: list[Count], heads: tuple[str, str, str]) -> str:
    rows = "".join(f"<tr><td>{escape(c.name)}</td><td>{escape(c.detail)}</td><td class=n>{c.count}</td>"
                   f"<td>{_who(c.learners)}</td></tr>" for c in items)
    return (f"<table><tr><th>{heads[0]}</th><th>{heads[1]}</th><th>{heads[2]}</th><th>learners</th></tr>"
            f"{rows}</table>")


def chapter_html(c: ChapterReport, top: int = 10) -> str:
    graded = len(c.scores)
    parts = [f'<h2 id="ch{c.number}">Chapter {c.number}{" — " + escape(c.title) if c.title else ""}</h2>',
             f"<p>{graded} learner(s) graded out of {c.max_points:g} points: mean {c.mean:.2f}, median "
             f"{c.median:g}. {len(c.not_submitted)} not submitted."
             + (f" {c.awaiting_manual} written answer(s) still to grade by hand count 0 here."
                if c.awaiting_manual else "")
             + "</p>", "<h3>Distribution of scores</h3>", histogram_svg(c.bins, c.max_points)]
    parts.append("<h3>Checks failed most</h3>")
    if c.failed_checks:
        parts += [bars_svg(c.failed_checks[:top], graded),
                  _counts_table(c.failed_checks[:top], ("check", "kind, points", "failed by"))]
    else:
        parts.append("<p>No check failed.</p>")
    parts.append("<h3>Known mistakes, by how many learners made them</h3>")
    parts.append(_counts_table(c.mistakes, ("mistake", "what the learner is told", "made by")) if c.mistakes
                 else "<p>No known mistake recognised.</p>")
    parts.append(f"<h3>Hidden cases failed by learners who passed every public case</h3><p>{len(c.public_passers)} "
                 "learner(s) passed every public case.</p>")
    parts.append(_counts_table(c.hidden_failed, ("hidden case", "message (first learner's)", "failed by"))
                 if c.hidden_failed else "<p>None: passing the public cases meant passing the hidden ones.</p>")
    parts.append("<h3>Not submitted</h3>")
    parts.append(f"<p>{_who(c.not_submitted)}</p>" if c.not_submitted else "<p>Everyone submitted.</p>")
    return "\n".join(parts)


def leaderboard_html(rows: list[dict]) -> str:
    """The capstone's leaderboard: learners (bold: none fixed) beside the baselines and the reference's runs."""
    def cell(value: object, fmt: str = "{}") -> str:
        return "<td class=n>?</td>" if value is None else f"<td class=n>{escape(fmt.format(value))}</td>"
    body = "".join(
        f"<tr><td>{escape(r['name']) if r['fixed'] else '<b>' + escape(r['name']) + '</b>'}</td>"
        f"<td class=n>{r['accuracy']:.1%} ± {r['se']:.1%}</td>{cell(r['parameters'], '{:,}')}"
        f"{cell(r['minutes'], '{:.1f}')}<td>{escape(str(r['device']))}</td>"
        f"<td>{'yes' if r['pretrained'] else 'no'}</td><td>{escape(r['verified'])}</td></tr>" for r in rows)
    learners = sum(not r["fixed"] for r in rows)
    return ('<h2 id="leaderboard">Capstone leaderboard</h2>'
            f"<p>{learners} trained model(s) measured by the grader on the test split, beside the baselines and "
            "the reference's recorded runs. Accuracy ± one standard error and parameters are the grader's; "
            "minutes, device and pretraining are what each run's summary says. A high score proves these "
            "weights score it, not that the learner's code and stated settings trained them: a row stays "
            "<i>not verified</i> until <code>course verify</code> trains the recorded recipe again with the "
            "reference implementation; <i>verified</i> means that re-run reached the hand-in's accuracy within "
            "the tolerance of run-to-run noise (chapter 08 of the book derives it). Not that the learner's code "
            "trained them, who ran it or how long it took; nor how the run was picked: learners see every run's "
            "test accuracy, and one who hands in the best of many on test has a row optimistic by up to their "
            "spread.</p>"
            "<table><tr><th>who</th><th>test accuracy</th><th>parameters</th><th>training minutes</th>"
            f"<th>device</th><th>pretrained</th><th>verified</th></tr>{body}</table>")


def render(report: ClassReport) -> str:
    """The whole page."""
    toc = " · ".join(f'<a href="#ch{c.number}">ch{c.number}</a>' for c in report.chapters)
    if report.leaderboard:
        toc += ' · <a href="#leaderboard">leaderboard</a>'
    body = "\n".join(chapter_html(c) for c in report.chapters) or "<p>The table holds no graded chapter.</p>"
    if report.leaderboard:
        body += "\n" + leaderboard_html(report.leaderboard)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>What the class got wrong'
            f'</title><style>{STYLE}</style></head><body><h1>What the class got wrong</h1>'
            f"<p>From the grade table in {escape(report.source)}: {len(report.learners)} learner(s). {toc}</p>"
            f"{body}</body></html>\n")
