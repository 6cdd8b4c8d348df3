"""The class grade table: SQLite, written only by the grading parent, one transaction per learner.

Tables
  grades(learner, chapter, kind, component, seq, points, max_points, status, message, isolation)
      one row per learner x component: a course_lib case ("values, no mask", "hidden case 3") or a
      notebook's written answer; kind is "course_lib", "capstone", "notebook" or "submission". No timestamps, so
      two runs compare equal.
  learners(learner, part, fingerprint, source, run_id, finished_at)
      one row per submission graded: part is its chapter ("02") or "*" (a submission for every chapter);
      listed here with the same fingerprint, it is finished: a re-run skips it.
  manual(learner, chapter, component, points, max_points)
      written answers graded by hand in formgrader (`course grade --manual`); they replace the
      "needs manual grading" rows of the same learner, chapter and cell when the table is read.
  measured(learner, chapter, kind, component, accuracy, se, parameters, weights, passed, overclaimed,
           minutes, device, pretrained)
      the typed fields of a grades row that carries a Measurement (rows.py: the capstone's trained model),
      written in the same transaction as the learner's rows and read back onto that row: what the
      leaderboard reads, never a message.

A kill at any moment loses at most the learner being written: SQLite rolls the transaction back.

Every open checks the file's schema against the one above (``check_schema``): a table with triggers,
views, indexes or tables that this module did not create is refused, never written to. Every CSV cell
of text that a spreadsheet would read as a formula (``= + - @``, tab, carriage return first) gets a
leading ``'`` (``csv_cell``).
"""
from __future__ import annotations

import csv
import sqlite3
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable

from .rows import GradeRow, Measurement

COLUMNS = ["learner", "chapter", "kind", "component", "points", "max_points", "status", "message", "isolation"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    learner TEXT NOT NULL, chapter TEXT NOT NULL, kind TEXT NOT NULL, component TEXT NOT NULL,
    seq INTEGER NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL, status TEXT NOT NULL,
    message TEXT NOT NULL, isolation TEXT NOT NULL,
    PRIMARY KEY (learner, chapter, kind, component));
CREATE TABLE IF NOT EXISTS learners (
    learner TEXT NOT NULL, part TEXT NOT NULL, fingerprint TEXT NOT NULL, source TEXT NOT NULL,
    run_id TEXT NOT NULL, finished_at REAL NOT NULL, PRIMARY KEY (learner, part));
CREATE TABLE IF NOT EXISTS manual (
    learner TEXT NOT NULL, chapter TEXT NOT NULL, component TEXT NOT NULL, points REAL NOT NULL,
    max_points REAL NOT NULL, PRIMARY KEY (learner, chapter, component));
CREATE TABLE IF NOT EXISTS measured (
    learner TEXT NOT NULL, chapter TEXT NOT NULL, kind TEXT NOT NULL, component TEXT NOT NULL,
    accuracy REAL NOT NULL, se REAL NOT NULL, parameters INTEGER NOT NULL, weights TEXT NOT NULL,
    passed INTEGER NOT NULL, overclaimed INTEGER NOT NULL, minutes REAL, device TEXT NOT NULL,
    pretrained INTEGER NOT NULL, PRIMARY KEY (learner, chapter, kind, component));
"""
MEASURED = tuple(f.name for f in fields(Measurement))  # the measured table's columns after the row's key
MANUAL = "needs manual grading"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class GradebookError(Exception):
    """The grade table cannot be used as it is; the message names the file and the fix."""


def _unreadable(path: Path, exc: Exception) -> GradebookError:
    return GradebookError(f"{path} is not a grade table course grade can read ({exc}); move it away, "
                          "or pass another --out, and grade again")


def _objects(db: sqlite3.Connection) -> set[tuple[str, str, str, str | None]]:
    return set(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


def expected_objects() -> set[tuple[str, str, str, str | None]]:
    """What ``SCHEMA`` creates (tables and their primary-key indexes), as sqlite_master lists it."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(SCHEMA)
        return _objects(db)
    finally:
        db.close()


def check_schema(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a table holding anything this module did not create: a trigger, a view, an index, another
    table, or one of ours with other columns (it would run or change what we write)."""
    try:
        found = _objects(db)
    except sqlite3.DatabaseError as exc:
        raise _unreadable(path, exc) from None
    strange = found - expected_objects()
    if any(kind == "table" and name == "learners" and "part TEXT" not in (sql or "") for kind, name, _, sql in strange):
        raise GradebookError(f"{path} was written by an older course grade (one submission per learner); grade "
                             "into a new --out folder")
    if strange:
        names = ", ".join(sorted(f"{kind} {name!r}" for kind, name, _, _ in strange))
        raise GradebookError(f"{path} holds objects course grade did not create ({names}); it may have been "
                             "tampered with. Nothing was written: move it away (keep it to investigate), or pass "
                             "another --out, and grade again")


class Gradebook:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
        try:
            self.db.execute("PRAGMA trusted_schema=OFF")
            check_schema(self.db, path)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise _unreadable(path, exc) from None
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def finished(self) -> dict[tuple[str, str], str]:
        """{(learner, part): fingerprint} of the submissions already graded."""
        return {(learner, part): fp for learner, part, fp in
                self.db.execute("SELECT learner, part, fingerprint FROM learners")}

    def commit_learner(self, learner: str, fingerprint: str, source: str, run_id: str,
                       rows: Iterable[GradeRow], part: str = "*", chapters: Iterable[str] | None = None) -> None:
        """Replace the learner's rows of ``chapters`` (all their rows when None) by ``rows``, in one
        transaction, and mark the submission ``part`` finished; other chapters' rows are kept."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            for table in ("grades", "measured"):
                if chapters is None:
                    db.execute(f"DELETE FROM {table} WHERE learner = ?", (learner,))
                for chapter in chapters or ():
                    db.execute(f"DELETE FROM {table} WHERE learner = ? AND chapter = ?", (learner, chapter))
            for seq, row in enumerate(rows):
                key = (learner, row.chapter, row.kind, row.component)
                db.execute("INSERT INTO grades VALUES (?,?,?,?,?,?,?,?,?,?)",
                           (*key, seq, float(row.points), float(row.max_points), row.status, row.message,
                            row.isolation))
                if row.measured is not None:
                    db.execute(f"INSERT INTO measured (learner, chapter, kind, component, {', '.join(MEASURED)}) "
                               f"VALUES ({', '.join('?' * (4 + len(MEASURED)))})", (*key, *_columns(row.measured)))
            db.execute("INSERT OR REPLACE INTO learners VALUES (?,?,?,?,?,?)",
                       (learner, part, fingerprint, source, run_id, time.time()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def set_manual(self, scores: Iterable[tuple[str, str, str, float, float]]) -> None:
        """Replace the hand-given scores with those formgrader holds now (one transaction)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM manual")
            db.executemany("INSERT OR REPLACE INTO manual VALUES (?,?,?,?,?)", list(scores))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def table(self, learner: str | None = None) -> list[tuple[str, GradeRow]]:
        """(learner, row) for every row, written answers graded by hand in place of their "needs manual grading" rows."""
        by_hand = f"m.points IS NOT NULL AND g.status = '{MANUAL}'"
        query = (f"SELECT g.learner, g.chapter, g.kind, g.component, "
                 f"CASE WHEN {by_hand} THEN MIN(m.points, g.max_points) ELSE g.points END, g.max_points, "
                 f"CASE WHEN {by_hand} THEN 'graded by hand' ELSE g.status END, "
                 f"CASE WHEN {by_hand} THEN 'graded by hand in formgrader' ELSE g.message END, g.isolation, "
                 + ", ".join(f"c.{name}" for name in MEASURED) +
                 " FROM grades g LEFT JOIN manual m ON g.learner = m.learner AND g.chapter = m.chapter "
                 "AND g.component = m.component AND g.kind = 'notebook' "
                 "LEFT JOIN measured c ON g.learner = c.learner AND g.chapter = c.chapter AND g.kind = c.kind "
                 "AND g.component = c.component")
        args: tuple = ()
        if learner is not None:
            query += " WHERE g.learner = ?"
            args = (learner,)
        query += " ORDER BY g.learner, g.chapter, CASE g.kind WHEN 'course_lib' THEN 0 ELSE 1 END, g.seq"
        return [(r[0], GradeRow(*r[1:9], measured=_measurement(r[9:]))) for r in self.db.execute(query, args)]

    def rows(self, learner: str) -> list[GradeRow]:
        return [row for _, row in self.table(learner)]

    def learners(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT learner FROM learners ORDER BY learner")]

    def export_csv(self, path: Path) -> None:
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(COLUMNS)
            for learner, row in self.table():
                writer.writerow([csv_cell(learner)] + [csv_cell(getattr(row, c)) for c in COLUMNS[1:]])
        tmp.replace(path)

    def export_totals(self, path: Path) -> None:
        totals: dict[tuple[str, str, str], list[float]] = {}
        for learner, row in self.table():
            t = totals.setdefault((learner, row.chapter, row.kind), [0.0, 0.0])
            t[0] += row.points
            t[1] += row.max_points
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(["learner", "chapter", "kind", "points", "max_points"])
            for (learner, chapter, kind), (p, m) in sorted(totals.items()):
                writer.writerow([csv_cell(learner), csv_cell(chapter), csv_cell(kind), csv_cell(p), csv_cell(m)])
        tmp.replace(path)


def _columns(m: Measurement) -> tuple[Any, ...]:
    """``m``'s values in MEASURED's order, as SQLite stores them (booleans as 0 or 1)."""
    return tuple(int(v) if isinstance(v, bool) else v for v in (getattr(m, name) for name in MEASURED))


def _measurement(values: tuple[Any, ...]) -> Measurement | None:
    """A row's Measurement from its ``measured`` columns in MEASURED's order (None where it has none)."""
    if values[0] is None:
        return None
    v = dict(zip(MEASURED, values))
    return Measurement(accuracy=float(v["accuracy"]), se=float(v["se"]), parameters=int(v["parameters"]),
                       weights=str(v["weights"]), passed=bool(v["passed"]), overclaimed=bool(v["overclaimed"]),
                       minutes=None if v["minutes"] is None else float(v["minutes"]), device=str(v["device"]),
                       pretrained=bool(v["pretrained"]))


def csv_cell(value: Any) -> str:
    """A CSV cell: numbers as ``%g``; text that a spreadsheet would run as a formula behind a ``'``."""
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text
