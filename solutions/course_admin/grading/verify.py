"""`course verify`: a capstone hand-in's recorded recipe, trained again with the reference's code.

    course verify submitted/zoe_ch08.zip --out grades/     # one learner, or a folder of them

The test split comes from a corpus every learner has, so weights that score well prove only that they score
well: they could have been trained on test, or longer than their summary says. A hand-in's ``run.json``
records its recipe (preset, steps, batch size, learning rate, evaluation steps, seed, dropout, bigrams,
threads). Verify checks that those settings are bounded and are exactly what `course capstone finetune`
writes for some options, then trains that recipe again with the *reference* implementation (``--impl
reference``, in a child process under memory, file-size and time limits), chooses the best
valid step as every run does, and compares that step's test accuracy with the grader's own measure of the
hand-in (grading/trained.py, which scores the weights with the reference's classes too):

``verified``        the re-run lands at most ``TOLERANCE`` below the hand-in. The tolerance comes from the
                    quick recipe trained with five seeds (book/data/capstone_seeds_quick.json): the gap
                    between two honest runs that a t distribution with 4 degrees of freedom exceeds once in
                    a thousand (noise.rerun_tolerance). A re-run above the hand-in is verified too: the
                    hand-in then claims less than it could.
``failed``          further below; or the weights do not fit, the vocabulary is not the train split's, or the
                    settings are not what any command writes: the message says which.
``not verifiable``  a GPU run, a pretrained start, an ensemble, or a run longer than ``--timeout`` allows:
                    verify it where it can run (a GPU machine), or not at all; the leaderboard says so.
``unfinished``      the re-run hit ``--timeout`` or ``--memory``: run verify again with more.

No learner code runs here: what the re-run reports follows from the recipe alone, so a submitted module that
carries finished weights (and would hand them back from inside any sandbox) cannot make a row verified. A
learner's classifier that computes chapter 08's contract trains, with the same recipe, within seed-to-seed
noise of the reference's: that noise is what ``TOLERANCE`` allows.

What a verified row proves: the recipe the summary states, trained on the train split, reaches the accuracy
handed in, within the tolerance of run-to-run noise (a wide net: see TOLERANCE). Not that the
learner's own code trained them (chapter 08's checks grade the code), nor that the learner ran it, nor how
long it took them. Verdicts go to ``--out/verified.json`` (one per learner, after each learner: a crash keeps
the ones already written), each naming the weights it was made on (``handin.digest``); the leaderboard of
`course report --out` shows it beside the same weights only. Re-runs are kept by recipe in
``--out/.verify-reruns/``: the reference trained on one recipe, with the same threads and versions, gives the
same weights, so a class that kept a preset's defaults is re-run once.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course_lib.provided.capstone import data, handin, noise, run as capstone
from course_lib.provided.capstone.stages import PRESETS, settings
from course_lib.provided.capstone.vocab import CharVocab
from course_lib.provided.layout import LAYOUT

from ..intake.submissions import Reader, SubmissionError, discover
from ..sandbox.procs import peak_memory_mb
from . import trained

VERDICTS = "verified.json"
RERUNS = ".verify-reruns"
SEEDS = LAYOUT.root / "book" / "data" / noise.SEED_RUNS       # the quick recipe's runs, five seeds
TOLERANCE = noise.rerun_tolerance(noise.seed_runs(SEEDS))     # false failures: noise.FALSE_FAILURES
SAME = ("model", "preset", "size", "max_len", "batch_size", "steps", "dropout", "lr", "warmup", "eval_every",
        "seed", "bigrams", "seeds")  # the settings the re-run must share with run.json
# What a recipe may ask of the grader, checked before anything runs (the presets: at most 4,000 steps of 128,
# evaluated 8 times). A recipe within them still stops at --timeout and --memory.
BOUNDS = {"steps": (1, 100_000), "batch_size": (1, 4096), "eval_every": (1, 100_000), "bigrams": (0, 10**6),
          "threads": (1, 256), "seed": (-2**63, 2**63 - 1)}
MAX_EVALUATIONS = 1000        # steps / eval_every: each evaluation scores valid and writes a checkpoint
CODE = [LAYOUT.solutions / "course_ref", LAYOUT.root / "course_lib" / "provided"]  # what a re-run's result follows


@dataclass
class Verdict:
    status: str                  # verified | failed | not verifiable | unfinished
    message: str
    weights: str = ""            # handin.digest of the hand-in the verdict is about
    submitted: float | None = None
    rerun: float | None = None
    step: int | None = None      # the re-run's best valid step
    when: str = ""


def bounded(run: dict[str, Any]) -> str | None:
    """What in ``run``'s recipe is out of bounds (None: nothing), counted arithmetically: nothing is built
    from a number before it is checked."""
    for key, (low, high) in BOUNDS.items():
        value = run.get(key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
            return f"{key} {handin._shown(value)} is not a whole number from {low:,} to {high:,}"
    lr = run.get("lr")
    if not (isinstance(lr, float) and 0 < lr <= 1):
        return f"lr {handin._shown(lr)} is not a learning rate in (0, 1]"
    evaluations = -(-run["steps"] // run["eval_every"])
    if evaluations > MAX_EVALUATIONS:
        return f"{evaluations:,} evaluations (steps / eval_every), over the {MAX_EVALUATIONS:,} a re-run may make"
    return None


def recipe(run: dict[str, Any], timeout_s: float) -> list[str] | Verdict:
    """The `course capstone finetune` options that give ``run``'s settings, or the verdict that there are none."""
    device = str(run.get("device", "cpu")).split(":")[0]
    if device != "cpu":
        return Verdict("not verifiable", f"a {handin._shown(device, 16)} run: verify re-runs on this machine's "
                                         "CPU; run it where the run's device is")
    if run.get("pretrained"):
        return Verdict("not verifiable", "fine-tuned from a pretraining run, which the hand-in does not include")
    if run.get("seeds", 1) != 1:
        return Verdict("not verifiable", f"an ensemble of {handin._shown(run.get('seeds'))} seeds: hand in one run")
    lacking = [k for k in SAME + ("threads",) if k not in run]
    if lacking or run.get("preset") not in PRESETS:
        return Verdict("failed", f"run.json lacks {', '.join(lacking) or 'a known preset'}: "
                                 "no `course capstone finetune` wrote it")
    if (bad := bounded(run)) is not None:
        return Verdict("failed", f"run.json's recipe: {bad}")
    seconds = run.get("train_seconds") or 0
    minutes = float(seconds) / 60 if isinstance(seconds, (int, float)) else 0.0
    if 2 * minutes * 60 > timeout_s:
        return Verdict("not verifiable", f"recorded {minutes:.0f} min of training; --timeout {timeout_s:.0f} s "
                                         "allows half of that at most")
    argv = ["finetune", "--model", str(run["model"]), "--preset", str(run["preset"]), "--steps", str(run["steps"]),
            "--batch-size", str(run["batch_size"]), "--lr", repr(run["lr"]), "--eval-every", str(run["eval_every"]),
            "--seed", str(run["seed"]), "--dropout", repr(run["dropout"]), "--bigrams", str(run["bigrams"]),
            "--seeds", "1", "--threads", str(threads(run)), "--device", "cpu", "--impl", "reference",
            "--no-progress"]
    try:
        given = settings(capstone.parser().parse_args(argv), "finetune")
    except (SystemExit, TypeError, ValueError, KeyError):
        return Verdict("failed", "run.json's settings are not options of `course capstone finetune`")
    differ = [f"{k} {handin._shown(run[k])} (the options give {given[k]!r})" for k in SAME if given[k] != run[k]]
    if differ:
        return Verdict("failed", "run.json's settings are not what its options give: " + "; ".join(differ[:3]))
    return argv


CHILD = "import sys; from course_admin.grading.verify import child; raise SystemExit(child(sys.argv[1]))"


def child(options: str) -> int:
    """The re-run, in its child process: ``options`` (JSON) parsed by `course capstone`'s own parser and trained
    as a learner's command trains, without the baselines' table; DIR/finetune-*/summary.json is what ``rerun``
    reads. The options are verify's checked recipe: nothing of a learner's is run or read."""
    from course_lib.provided.capstone.stages import finetune
    args = capstone.parser().parse_args(json.loads(options))
    if args.command != "finetune" or args.impl != "reference":
        print(f"course verify: a re-run is a `finetune --impl reference` recipe, not {options[:80]}", file=sys.stderr)
        return 2
    finetune(args, table=False)
    return 0


def threads(run: dict[str, Any]) -> int:
    """The re-run's CPU threads: the run's (its numbers depend on them), at most this machine's cores."""
    return max(1, min(int(run.get("threads") or 1), os.cpu_count() or 1))


def recipe_key(argv: list[str]) -> str:
    """What a re-run's result follows from: the options, the reference's code and the torch version."""
    import torch
    h = hashlib.sha256(json.dumps([argv, torch.__version__, sys.version_info[:2]]).encode())
    for path in sorted(p for root in CODE for p in root.rglob("*.py")):
        h.update(path.relative_to(LAYOUT.root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:24]


def rerun(argv: list[str], timeout_s: float, memory_mb: int, work: Path) -> tuple[int, float] | Verdict:
    """(best valid step, its test accuracy) of the recipe ``argv`` trained with the reference's code in a child
    process (``child``) under ``--memory`` (address space), 512 MB a file, and ``--timeout``."""
    box = Path(tempfile.mkdtemp(prefix="verify_", dir=work))

    def limits() -> None:  # in the child, before it runs anything
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 2**20,) * 2)
    try:
        env = {**os.environ, "OMP_NUM_THREADS": argv[argv.index("--threads") + 1], "COURSE_LANG": "en"}
        with open(box / "log.txt", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps([*argv, "--out", str(box)])], cwd=box,
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=limits, start_new_session=True)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return Verdict("unfinished", f"the re-run did not finish in --timeout {timeout_s:.0f} s")
        summaries = list(box.glob("finetune-*/summary.json"))
        if proc.returncode != 0 or len(summaries) != 1:
            tail = (box / "log.txt").read_text(errors="replace").strip()[-300:]
            return Verdict("unfinished", f"the re-run stopped (exit status {proc.returncode}; --memory "
                                         f"{memory_mb} MB): {tail or 'no output'}")
        summary = json.loads(summaries[0].read_text(encoding="utf-8"))
        best = summary.get("best_valid") or {"step": summary["steps"], "test_accuracy": summary["test_accuracy"]}
        return int(best["step"]), float(best["test_accuracy"])
    finally:
        shutil.rmtree(box, ignore_errors=True)


def cached_rerun(argv: list[str], timeout_s: float, memory_mb: int, work: Path,
                 cache: Path | None) -> tuple[int, float] | Verdict:
    """``rerun``, kept in ``cache`` (one JSON file a recipe) when it finished: a recipe is trained once."""
    path = cache / f"{recipe_key(argv)}.json" if cache is not None else None
    if path is not None and path.is_file():
        kept = json.loads(path.read_text(encoding="utf-8"))
        return int(kept["step"]), float(kept["test_accuracy"])
    result = rerun(argv, timeout_s, memory_mb, work)
    if path is not None and not isinstance(result, Verdict):
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(".part")
        part.write_text(json.dumps({"argv": argv, "step": result[0], "test_accuracy": result[1]}), encoding="utf-8")
        part.replace(path)
    return result


def verify(reader: Reader, timeout_s: float = 1200.0, memory_mb: int = 4096, work: Path | None = None,
           cache: Path | None = None) -> Verdict:
    """The verdict on one submission's hand-in (the module's docstring). Never raises for the learner's fault."""
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    try:
        got, submitted, _, _ = trained.measure(reader)
    except handin.HandInError as err:
        return Verdict("failed", f"the hand-in cannot be graded: {err}", when=when)
    ran = recipe(got.run, timeout_s)
    if isinstance(ran, Verdict):
        verdict = ran
    else:
        vocab = CharVocab.build([r.text for r in data.reviews().train])
        if got.vocab != vocab:
            verdict = Verdict("failed", f"the hand-in's vocabulary ({len(got.vocab)} tokens) is not the one its "
                                        f"command builds from the train split ({len(vocab)}): trained on other text")
        else:
            best = cached_rerun(ran, timeout_s, memory_mb, work or Path(tempfile.gettempdir()), cache)
            verdict = best if isinstance(best, Verdict) else judge(submitted, *best)
    verdict.weights, verdict.submitted, verdict.when = handin.digest(got.state), submitted, when
    return verdict


def judge(submitted: float, step: int, again: float) -> Verdict:
    """The verdict of a finished re-run: ``again`` (test accuracy at ``step``) beside the hand-in's."""
    gap = submitted - again
    said = (f"re-run on train alone: {again:.1%} on test (best valid at step {step}); the hand-in: {submitted:.1%}")
    if gap > TOLERANCE + 1e-9:
        return Verdict("failed", f"{said}: {100 * gap:.1f} points below it, more than two runs differ by "
                                 f"(at most {100 * TOLERANCE:.1f})", rerun=again, step=step)
    return Verdict("verified", f"{said}: within {100 * TOLERANCE:.1f} points", rerun=again, step=step)


def load_verdicts(folder: Path) -> dict[str, dict[str, Any]]:
    path = Path(folder) / VERDICTS
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def save_verdict(folder: Path, learner: str, verdict: Verdict) -> None:
    """Add one learner's verdict to ``folder/verified.json`` (written whole, then renamed: never half a file)."""
    verdicts = load_verdicts(folder)
    verdicts[learner] = asdict(verdict)
    part = Path(folder) / (VERDICTS + ".part")
    part.write_text(json.dumps(verdicts, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    part.replace(Path(folder) / VERDICTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="+", help="chapter 08 submissions: zips, folders, or folders of those")
    parser.add_argument("--out", required=True, help="the grading folder (`course grade --out`): verified.json")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a re-run may take (default 1200)")
    parser.add_argument("--memory", type=int, default=4096, help="address space of a re-run, MB (default 4096)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for sub in discover(args.submissions):
        try:
            if sub.error:
                raise SubmissionError(sub.error)
            verdict = verify(Reader(sub.path), args.timeout, args.memory, cache=out / RERUNS)
        except SubmissionError as err:
            counts["not verified"] = counts.get("not verified", 0) + 1
            print(f"{sub.learner}: not verified: {err}", file=sys.stderr)
            continue
        except Exception as exc:  # noqa: BLE001 - verify's own bug: the others are still verified, this one said
            counts["not verified"] = counts.get("not verified", 0) + 1
            print(f"{sub.learner}: not verified: verify itself failed ({type(exc).__name__}: {exc}); the "
                  "verdicts of the others are kept", file=sys.stderr)
            continue
        save_verdict(out, sub.learner, verdict)
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
        print(f"{sub.learner}: {verdict.status}: {verdict.message}", flush=True)
    print(f"{', '.join(f'{n} {s}' for s, n in sorted(counts.items())) or 'no submission'}; in {out / VERDICTS}")
    own, rerun_mb = peak_memory_mb()
    print(f"peak memory: {own:.0f} MB in verify, {rerun_mb:.0f} MB in its largest re-run")
    return 1 if counts.get("not verified") or not counts else 0
