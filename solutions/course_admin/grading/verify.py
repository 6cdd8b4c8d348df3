"""`course capstone verify`: a hand-in's recorded command run again, with the learner's code, on train alone.

    course capstone verify submitted/zoe_ch08.zip --out grades/     # one learner, or a folder of them

The test split comes from a corpus every learner has, so weights that score well prove only that they score
well: they could have been trained on test. Verify takes the command the hand-in's ``run.json`` records
(its preset, steps, batch size, learning rate, seed, dropout, bigrams, threads), checks that those options
give exactly the recorded settings, and runs it with the submission's ``course_lib`` in a bubblewrap
sandbox that holds the train reviews and nothing else: the corpus package is hidden (shown empty), valid
and test are not in the box. At each evaluation step the sandbox sends the weights (verify_child.py);
here, the *reference* classifier scores each on valid, takes the best (as every run does) and scores it
on test. The verdict compares that with the hand-in's own test accuracy (grading/trained.py):

``verified``        the re-run lands at most ``TOLERANCE`` below the hand-in (three standard deviations of
                    the difference of two runs, from the recorded runs that differ only in their seed). A
                    re-run above the hand-in is verified too: the hand-in then claims less than it could.
``failed``          further below; or the weights do not fit, the vocabulary is not the train split's, the
                    settings are not what any command writes, or the run crashed: the message says which.
``not verifiable``  a GPU run, a pretrained start, an ensemble, or a run longer than ``--timeout`` allows:
                    verify it where it can run (a GPU machine), or not at all; the leaderboard says so.
``unfinished``      the re-run hit ``--timeout``: run verify again on a quieter machine or with more time.

What a verified row proves: the learner's code, run with the settings their summary states, on the train
split only, reaches the accuracy handed in, within run-to-run noise. Not that the learner ran it, nor how
long it took them. Verdicts go to ``--out/verified.json`` (one per learner, after each learner: a crash
keeps the ones already written), each naming the weights it was made on (``handin.digest``); the
leaderboard of `course report --out` shows it beside the same weights only.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course_lib.provided.capstone import data, handin, run as capstone
from course_lib.provided.capstone.stages import PRESETS, settings
from course_lib.provided.capstone.vocab import CharVocab
from course_lib.provided.layout import LAYOUT, modules_for

from ..intake.submissions import Reader, SubmissionError, discover
from ..sandbox import cold, warm
from ..sandbox.results import ResultRefused, read_result
from . import trained
from .sandboxed import fill_snapshot

VERDICTS = "verified.json"
RECORDS = sorted((LAYOUT.root / "book" / "data").glob("capstone_cpu*.json"))
TOLERANCE = handin.rerun_tolerance(handin.seed_spread(RECORDS))  # 1.9 points from the recorded seeds
CHILD = Path(__file__).resolve().parent.parent / "sandbox" / "verify_child.py"
MAX_FRAME = 48 * 1024**2  # one frame of weights, well above the quick presets' (3 MB; with bigrams 17 MB)
SAME = ("model", "preset", "size", "max_len", "batch_size", "steps", "dropout", "lr", "warmup", "eval_every",
        "seed", "bigrams", "seeds")  # the settings the re-run must share with run.json


@dataclass
class Verdict:
    status: str                  # verified | failed | not verifiable | unfinished
    message: str
    weights: str = ""            # handin.digest of the hand-in the verdict is about
    submitted: float | None = None
    rerun: float | None = None
    step: int | None = None      # the re-run's best valid step
    when: str = ""


def recipe(run: dict[str, Any], timeout_s: float) -> list[str] | Verdict:
    """The `course capstone finetune` options that give ``run``'s settings, or the verdict that there are none."""
    device = str(run.get("device", "cpu")).split(":")[0]
    if device != "cpu":
        return Verdict("not verifiable", f"a {device} run: this sandbox has no GPU; run verify on a GPU machine")
    if run.get("pretrained"):
        return Verdict("not verifiable", "fine-tuned from a pretraining run, which the hand-in does not include")
    if run.get("seeds", 1) != 1:
        return Verdict("not verifiable", f"an ensemble of {run.get('seeds')} seeds: hand in one run")
    lacking = [k for k in SAME + ("threads",) if k not in run]
    if lacking or run.get("preset") not in PRESETS:
        return Verdict("failed", f"run.json lacks {', '.join(lacking) or 'a known preset'}: "
                                 "no `course capstone finetune` wrote it")
    minutes = float(run.get("train_seconds") or 0) / 60
    if 2 * minutes * 60 > timeout_s:
        return Verdict("not verifiable", f"recorded {minutes:.0f} min of training; --timeout {timeout_s:.0f} s "
                                         "allows half of that at most")
    argv = ["finetune", "--model", str(run["model"]), "--preset", str(run["preset"]), "--steps", str(run["steps"]),
            "--batch-size", str(run["batch_size"]), "--lr", repr(run["lr"]), "--eval-every", str(run["eval_every"]),
            "--seed", str(run["seed"]), "--dropout", repr(run["dropout"]), "--bigrams", str(run["bigrams"]),
            "--seeds", "1", "--threads", str(run["threads"] or 1), "--device", "cpu", "--out", "/tmp/verify",
            "--no-progress"]
    try:
        given = settings(capstone.parser().parse_args(argv), "finetune")
    except (SystemExit, TypeError, ValueError, KeyError):
        return Verdict("failed", "run.json's settings are not options of `course capstone finetune`")
    differ = [f"{k} {run[k]!r} (the options give {given[k]!r})" for k in SAME if given[k] != run[k]]
    if differ:
        return Verdict("failed", "run.json's settings are not what its options give: " + "; ".join(differ[:3]))
    return argv


def eval_steps(run: dict[str, Any]) -> list[int]:
    """The steps at which the training loop evaluates (training.train): every eval_every, and the last."""
    steps, every = int(run["steps"]), int(run["eval_every"])
    return [s for s in range(1, steps + 1) if every and s % every == 0 or s == steps]


def rerun(reader: Reader, run: dict[str, Any], argv: list[str], timeout_s: float, memory_mb: int,
          work: Path) -> list[dict[str, Any]] | Verdict:
    """The weights the re-run sent at each evaluation step (records checked by results.read_result), or the
    verdict on why there are not all of them."""
    box = Path(tempfile.mkdtemp(prefix="verify_", dir=work))
    try:
        missing = fill_snapshot(reader, box, modules_for(handin.CHAPTER))
        if missing:
            return Verdict("failed", f"course_lib/{', course_lib/'.join(missing)} missing from the submission")
        shutil.copy2(warm.FILES["child.py"], box / "_grader_child.py")
        shutil.copy2(CHILD, box / "_verify_child.py")
        train = [[r.text, r.label] for r in data.reviews().train]
        (box / "train.json").write_text(json.dumps(train, ensure_ascii=False), encoding="utf-8")
        exe, prefix, site = cold.python_paths()
        (box / "verify.json").write_text(json.dumps({"argv": argv, "site_packages": str(site),
                                                     "python_prefix": str(prefix), "output_cap": 1024**2,
                                                     "max_frame": MAX_FRAME - 4096}))
        steps = eval_steps(run)
        threads = int(run["threads"] or 1)
        limits = cold.Limits(wall_s=timeout_s, cpu_s=timeout_s * threads + 5, memory_bytes=memory_mb * 1024**2,
                             file_bytes=512 * 1024**2, tmp_bytes=1024**3, cpus=float(threads),
                             result_bytes=MAX_FRAME, results_total=MAX_FRAME * len(steps) + 1024**2)
        log = box / "log.txt"
        result = cold.run(box, [str(exe), "-I", "-S", "/sandbox/_verify_child.py"], limits, "bwrap", log,
                          hide=[data.package_dir().resolve()])
        tail = log.read_text(errors="replace").strip()[-400:] if log.is_file() else ""
        frames = []
        for index, step in enumerate(steps):
            path = box / "out" / f"{index:03d}.pt"
            if not path.is_file():
                if result.timed_out:
                    return Verdict("unfinished", f"the re-run reached no step {step} in --timeout {timeout_s:.0f} s")
                return Verdict("failed", f"the re-run ended before step {step} "
                                         f"(exit status {result.returncode}): {tail or 'no output'}")
            try:
                record = read_result(path, MAX_FRAME)
            except ResultRefused as exc:
                return Verdict("failed", f"the re-run's weights at step {step} were refused: {exc}")
            if not (isinstance(record, dict) and record.get("kind") == "weights" and record.get("step") == step
                    and isinstance(record.get("state"), dict)):
                return Verdict("failed", f"the re-run sent something else than its weights at step {step}")
            frames.append(record)
        return frames
    finally:
        shutil.rmtree(box, ignore_errors=True)


def best_on_valid(frames: list[dict[str, Any]], run: dict[str, Any], vocab: CharVocab) -> tuple[int, float] | Verdict:
    """(step, test accuracy) of the re-run's weights with the best valid accuracy (the first, on a tie), each
    scored with the reference classifier; a verdict when they do not fit it."""
    best: tuple[float, int, Any] | None = None
    for frame in frames:
        got = handin.HandIn(frame["state"], run, vocab, Path("re-run"))
        try:
            model = handin.build_model(got, impl="reference")
        except handin.HandInError as err:
            return Verdict("failed", f"the re-run's weights at step {frame['step']}: {err}")
        valid, _ = handin.accuracy(model, got, "valid")
        if best is None or valid > best[0]:
            best = (valid, frame["step"], (model, got))
    assert best is not None
    model, got = best[2]
    return best[1], handin.accuracy(model, got, "test")[0]


def verify(reader: Reader, timeout_s: float = 1200.0, memory_mb: int = 4096, work: Path | None = None) -> Verdict:
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
            frames = rerun(reader, got.run, ran, timeout_s, memory_mb, work or Path(tempfile.gettempdir()))
            best = best_on_valid(frames, got.run, vocab) if isinstance(frames, list) else frames
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
    parser = argparse.ArgumentParser(prog="course capstone verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="+", help="chapter 08 submissions: zips, folders, or folders of those")
    parser.add_argument("--out", required=True, help="the grading folder (`course grade --out`): verified.json")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a re-run may take (default 1200)")
    parser.add_argument("--memory", type=int, default=4096, help="memory limit of the re-run, MB")
    args = parser.parse_args(argv)
    ready, why = cold.bwrap_works()
    if not ready:
        print(f"course capstone verify: needs bubblewrap ({why}): without it the learner's code could read the "
              "corpus's test split, and a re-run would prove nothing. Nothing verified.", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for sub in discover(args.submissions):
        try:
            if sub.error:
                raise SubmissionError(sub.error)
            verdict = verify(Reader(sub.path), args.timeout, args.memory)
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
    return 1 if counts.get("not verified") or not counts else 0

