"""What a grading run grades: each chapter's cases (public, then hidden), their inputs, and the values
they are judged against (the reference's outputs and those of the known-wrong variants).

Everything here is computed in the grader's own process with the reference; learner code never runs here.
With them, per case, the evidence the report-wide rules of course_lib/provided/diagnosis.py need: the chapters
whose reference modules the case's probe runs (traced once, here, on the reference: never on learner code),
and the known mistakes whose outputs fail it.

Computing it takes seconds to a minute a chapter (every known-wrong variant on every case), so a grading
run keeps it in a store (``use_store``: ``<--out>/.prepared/``), one file a chapter named by a fingerprint
of everything it was computed from: the next run, and every worker process of this one, load it instead.
Runs into other ``--out`` folders can share what they computed through one more folder, named by
$COURSE_GRADE_CACHE (a week's runs, one a chapter, or a test suite's hundred): it must be yours alone (mode 700),
as the store is; one that is not is not used, and the run says so.
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

from course_lib.provided import chapters, diagnosis
from course_lib.provided.checking import Case, run_probe
from course_lib.provided.i18n import HIDDEN_CASE
from course_lib.provided.layout import LAYOUT, chapter_facts, modules_for, prerequisites
from course_lib.provided.loader import load_file, load_impl

from ..release import refs
from ..release.refs import outputs_for

Tensors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class GradedCase:
    index: int
    case: Case
    hidden: bool
    label: str          # the name shown to the learner: the case's name, or "hidden case N"


@dataclass
class Chapter:
    number: str
    title: str
    spec: ModuleType
    cases: list[GradedCase]
    inputs: list[Tensors]
    expected: list[Tensors]
    mistakes: list[dict[str, Tensors]]
    inputs_files: dict[bool, Path]  # by hidden: the public or the hidden cases' inputs alone (the others {}),
                                    # saved once for every sandbox of this run
    own_modules: list[str]      # course_lib files this chapter grades
    modules: list[str]          # the files it runs: its prerequisites' modules, then its own
    prereqs: list[str]          # chapters it builds on, directly or not, earliest first
    runs: list[frozenset[str]] = field(default_factory=list)   # by case: the chapters whose code it runs
    fails: list[frozenset[str]] = field(default_factory=list)  # by case: the known mistakes that fail it

    def prereq_modules(self) -> list[str]:
        return [m for m in self.modules if m not in self.own_modules]


def hidden_cases(number: str) -> list[Case]:
    path = LAYOUT.hidden_file(number)
    if not path.is_file():
        return []
    return list(load_file(f"course_hidden_ch{number}", path).CASES)


_PREPARED: dict[str, Chapter] = {}
_CACHE_DIR: list[Path] = []
_STORE: list[Path] = []
# what a chapter's prepared values depend on beyond its own spec, hidden cases and variants
_ENGINE = [Path(refs.__file__), Path(refs.__file__).with_name("variants.py"), Path(__file__)] + \
    [LAYOUT.root / "course_lib" / "provided" / n for n in ("cases.py", "checking.py", "loader.py", "diagnosis.py")]
VALUES = ("inputs", "expected", "mistakes", "runs", "fails")  # what a stored chapter holds, a list by case
SHARED = "COURSE_GRADE_CACHE"  # the environment variable naming a folder shared by grading runs (see above)
_REFUSED: set[str] = set()     # shared folders already refused (said once a process)


def use_store(folder: Path | str | None) -> None:
    """Keep prepared chapters in ``folder`` (created when first written); None: in memory only."""
    _STORE[:] = [Path(folder)] if folder else []


def chapter_fingerprint(number: str) -> str:
    """Changes when anything a chapter's prepared values come from changes (see ``_ENGINE``)."""
    h = hashlib.sha256(f"ch{number}|torch {torch.__version__}".encode())
    for path in [*sorted(LAYOUT.specs.glob("*.py")), LAYOUT.hidden_file(number), LAYOUT.mistakes_file(number),
                 *LAYOUT.reference_modules(), *_ENGINE]:  # every spec: a spec may use another's helpers
        h.update(path.name.encode() + (path.read_bytes() if path.is_file() else b"-"))
    return h.hexdigest()[:16]


def _compute(number: str, graded: list[GradedCase]) -> dict[str, list]:
    spec = chapters.load_spec(number)
    owner = diagnosis.module_owners(LAYOUT.reference)
    values: dict[str, list] = {k: [] for k in VALUES}
    for g in graded:
        torch.manual_seed(0)
        x = g.case.make_inputs(g.case.seed)
        out = outputs_for(number, g.case, x)
        _, ran = diagnosis.traced(lambda: run_probe(spec.PROBES, g.case, load_impl("reference"), x), owner)
        values["inputs"].append(x)
        values["expected"].append(out["expected"])
        values["mistakes"].append(out["mistakes"])
        values["runs"].append(sorted(ran))
        values["fails"].append(sorted(diagnosis.failing_mistakes(number, g.case, x, out["expected"], out["mistakes"])))
    return values


def shared_folder() -> Path | None:
    """$COURSE_GRADE_CACHE's folder (created, mode 700) when it is set and yours alone, else None."""
    value = os.environ.get(SHARED)
    if not value:
        return None
    folder = Path(value)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError as exc:
        problem = f"cannot be made ({exc.strerror})"
    else:
        if st.st_uid == os.geteuid() and not st.st_mode & 0o077:
            return folder
        problem = "is not yours alone: `chmod 700` it, or unset the variable"
    if value not in _REFUSED:
        _REFUSED.add(value)
        print(f"course grade: {SHARED}={value} {problem}; it holds expected values, so it is not used and every "
              f"chapter is computed again for this run", file=sys.stderr)
    return None


def _load(path: Path, cases: int) -> dict[str, list] | None:
    """A stored chapter that loads and fits ``cases``, else None: never trusted beyond that."""
    try:
        values = torch.load(path, weights_only=True)
        if all(len(values[k]) == cases for k in VALUES):
            return values
    except Exception:  # noqa: BLE001 - missing, partly written by a killed run, or foreign: compute again
        pass
    return None


def _save(path: Path, values: dict[str, list]) -> None:
    """Atomically (a worker loading it meanwhile sees the whole file or none), dropping older fingerprints."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    torch.save(values, tmp)
    tmp.replace(path)
    number = path.name.split("-")[0]
    for old in path.parent.glob(f"{number}-*.pt"):
        if old != path:
            old.unlink(missing_ok=True)


def _values(number: str, graded: list[GradedCase]) -> dict[str, list]:
    """The chapter's inputs, expected and known-wrong outputs: from the store when there, else from the shared
    folder, else computed (and stored in both)."""
    if not _STORE:
        return _compute(number, graded)
    name = f"ch{number}-{chapter_fingerprint(number)}.pt"
    values = _load(_STORE[0] / name, len(graded))
    if values is not None:
        return values
    shared = shared_folder()
    values = _load(shared / name, len(graded)) if shared else None
    if values is None:
        values = _compute(number, graded)
        if shared:
            _save(shared / name, values)
    _save(_STORE[0] / name, values)
    return values


def _cache_dir() -> Path:
    if not _CACHE_DIR:
        _CACHE_DIR.append(Path(tempfile.mkdtemp(prefix=f"course_grade_{os.getpid()}_inputs_")))
        atexit.register(shutil.rmtree, _CACHE_DIR[0], True)
    return _CACHE_DIR[0]


def prepare(number: str) -> Chapter:
    """Inputs, expected outputs and known-wrong outputs of every case of a chapter (once per process)."""
    if number in _PREPARED:
        return _PREPARED[number]
    spec = chapters.load_spec(number)
    graded = [GradedCase(i, c, False, c.name) for i, c in enumerate(spec.CASES)]
    for k, c in enumerate(hidden_cases(number), start=1):
        graded.append(GradedCase(len(graded), c, True, HIDDEN_CASE.format(number=k)))  # English: a gradebook key
    values = _values(number, graded)
    inputs, expected, mistakes = values["inputs"], values["expected"], values["mistakes"]
    inputs_files = {}
    for hidden in (False, True):  # a sandbox's public phase never holds a hidden case's inputs
        inputs_files[hidden] = _cache_dir() / f"ch{number}_inputs_{'hidden' if hidden else 'public'}.pt"
        torch.save([{k: v.clone() for k, v in x.items()} if g.hidden == hidden else {}
                    for g, x in zip(graded, inputs)], inputs_files[hidden])
    facts = chapter_facts(number)
    chapter = Chapter(number, facts.title, spec, graded, inputs, expected, mistakes, inputs_files,
                      list(facts.modules), modules_for(number), prerequisites(number),
                      [frozenset(r) for r in values["runs"]], [frozenset(f) for f in values["fails"]])
    _PREPARED[number] = chapter
    return chapter


def save_prepared(number: str, folder: Path) -> Path:
    """Chapter ``number`` prepared here (or taken from this process's memory) and written into ``folder`` as a
    run's store: a `course grade --out` whose store that is loads it instead of computing it."""
    chapter = prepare(number)
    values = {"inputs": chapter.inputs, "expected": chapter.expected, "mistakes": chapter.mistakes,
              "runs": [sorted(r) for r in chapter.runs], "fails": [sorted(f) for f in chapter.fails]}
    path = Path(folder) / f"ch{number}-{chapter_fingerprint(number)}.pt"
    _save(path, values)
    return path


def public_only(chapter: Chapter) -> Chapter:
    """``chapter`` with its public cases alone (they come first, so their indices are unchanged)."""
    return dataclasses.replace(chapter, cases=[g for g in chapter.cases if not g.hidden])


def chapters_to_run(numbers: list[str]) -> list[str]:
    """The chapters graded, with the prerequisites their messages need, earliest first."""
    wanted = set(numbers)
    for n in numbers:
        wanted.update(prerequisites(n))
    return sorted(wanted)


def grader_fingerprint(numbers: list[str], prereqs: str) -> str:
    """Changes when the chapters graded, their specs, hidden cases, variants, the reference or the policy change."""
    h = hashlib.sha256(f"{','.join(numbers)}|prereqs={prereqs}".encode())
    for number in chapters_to_run(numbers):
        for path in (*LAYOUT.spec_files(number), LAYOUT.hidden_file(number), LAYOUT.mistakes_file(number)):
            h.update(path.read_bytes() if path.is_file() else b"-")
    for path in LAYOUT.reference_modules():
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cleanup() -> None:
    if _CACHE_DIR:
        shutil.rmtree(_CACHE_DIR.pop(), ignore_errors=True)
