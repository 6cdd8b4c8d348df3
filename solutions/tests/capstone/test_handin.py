"""The trained capstone model as a hand-in (issue 28): packed safely, read back, and every bad file named.

A real two-step fine-tuning run of the reference classifier is packed, read and scored again: the recomputed
test accuracy is the run's own. Then each bad hand-in the issue lists is planted (a pickle, a 2 GB file, NaN
weights, missing, extra and wrongly shaped parameters, a vocabulary of another run, an LSTM run, no run) and
must raise HandInError with a message that names it, never a traceback from deep inside.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load, save_file

from course_lib.provided.capstone import handin
from course_lib.provided.capstone.handin import HandInError

from .test_trained import packed_handin
from .test_training import one_thread  # noqa: F401 - autouse: tiny models, one thread

pytestmark = [pytest.mark.training]


def weights_path(submission: Path) -> Path:
    return submission / handin.FOLDER / handin.WEIGHTS


def read_state(submission: Path) -> dict[str, torch.Tensor]:
    """The weights, read into memory (a mapped file that a test then rewrites would crash the process)."""
    return load(weights_path(submission).read_bytes())


@pytest.fixture(scope="module")
def pristine(two_step_run: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The session's 2-step run (conftest.py) and its hand-in, packed once a process (test_trained.packed_handin,
    shared with the planted classes' submissions)."""
    root = tmp_path_factory.mktemp("handin")
    shutil.copytree(packed_handin(two_step_run), root / "submission" / handin.FOLDER)
    return two_step_run, root / "submission"


@pytest.fixture
def packed(pristine, tmp_path: Path) -> tuple[Path, Path]:
    """(run folder, submission folder with capstone/ packed from it): this test's own copies."""
    run, submission = tmp_path / "run", tmp_path / "submission"
    shutil.copytree(pristine[0], run)
    shutil.copytree(pristine[1], submission)
    return run, submission


def test_a_packed_run_reads_back_and_scores_what_it_recorded(packed) -> None:
    run, submission = packed
    files = sorted(p.name for p in (submission / handin.FOLDER).iterdir())
    assert files == sorted([handin.WEIGHTS, handin.RUN, handin.VOCAB])
    got = handin.read_handin(submission)
    summary = json.loads((run / "summary.json").read_text())
    best = summary.get("best_valid") or summary
    model = handin.build_model(got, impl="reference")
    test, se = handin.accuracy(model, got, "test")
    assert test == pytest.approx(best["test_accuracy"], abs=1e-9)          # the grader's number is the run's
    assert got.claimed_test_accuracy == pytest.approx(best["test_accuracy"])
    assert se == pytest.approx((test * (1 - test) / 1_723) ** 0.5)
    assert 0.005 < se < 0.013                                               # about +-0.9 points near 85%


def test_the_weights_file_is_tensors_only(packed) -> None:
    _, submission = packed
    start = (submission / handin.FOLDER / handin.WEIGHTS).read_bytes()[:8]
    assert not start.startswith(handin.PICKLE_STARTS)
    assert set(read_state(submission)) == set(handin.weights_of(packed[0]))


def test_a_lying_summary_is_seen_against_the_recomputed_accuracy(packed) -> None:
    _, submission = packed
    run_file = submission / handin.FOLDER / handin.RUN
    claimed = json.loads(run_file.read_text())
    (claimed.get("best_valid") or claimed)["test_accuracy"] = 0.99
    run_file.write_text(json.dumps(claimed))
    got = handin.read_handin(submission)
    test, se = handin.accuracy(handin.build_model(got, impl="reference"), got)
    assert got.claimed_test_accuracy == 0.99 and got.claimed_test_accuracy > test + 3 * se


def test_pack_refuses_a_run_the_current_code_scores_otherwise(packed, tmp_path: Path) -> None:
    run, _ = packed
    summary = json.loads((run / "summary.json").read_text())
    (summary.get("best_valid") or summary)["valid_accuracy"] += 0.1         # as if trained by other code
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(HandInError, match="your classifier changed since this run"):
        handin.pack(run, tmp_path / "s", impl="reference")
    assert not (tmp_path / "s" / handin.FOLDER).exists()


def test_pack_names_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(HandInError, match="not a finished fine-tuning run"):
        handin.pack(tmp_path, tmp_path / "s")


def test_find_runs_puts_the_best_valid_first(packed, tmp_path: Path) -> None:
    runs = []
    for name, accuracy in (("a", 0.6), ("b", 0.7)):
        folder = tmp_path / "runs" / name / "finetune-transformer-quick"
        shutil.copytree(packed[0], folder)
        summary = json.loads((folder / "summary.json").read_text())
        summary.pop("best_valid", None)
        summary["valid_accuracy"] = accuracy
        (folder / "summary.json").write_text(json.dumps(summary))
        runs.append(folder)
    assert handin.find_runs(tmp_path / "runs") == runs[::-1]


# ------------------------------------------------------------------ planted bad hand-ins: each named
def test_no_hand_in(tmp_path: Path) -> None:
    with pytest.raises(HandInError, match="no trained model in the submission") as caught:
        handin.read_handin(tmp_path)
    assert caught.value.missing  # the grader's "missing" status reads this flag, not the message's words


def test_a_hand_in_error_speaks_the_learners_language(packed, tmp_path: Path, monkeypatch) -> None:
    """The hand-in's errors reach a learner at `make submit` and in the feedback: in Chinese in a Chinese tree,
    with the file, the numbers and the command kept; the grader still tells "missing" from "error"."""
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    with pytest.raises(HandInError, match="提交中没有训练好的模型") as caught:
        handin.read_handin(tmp_path)
    assert caught.value.missing and "capstone/model.safetensors" in str(caught.value)
    _, submission = packed
    run = json.loads((submission / "capstone" / "run.json").read_text())
    (submission / "capstone" / "run.json").write_text(json.dumps({**run, "dropout": 1.5}))
    with pytest.raises(HandInError, match=r"dropout 1\.5 不是小于 1 的概率.*make submit CH=08") as caught:
        handin.read_handin(submission)
    assert not caught.value.missing


def test_a_pickle_is_never_loaded(packed) -> None:
    _, submission = packed
    torch.save(read_state(submission), weights_path(submission))
    with pytest.raises(HandInError, match="is a pickle"):
        handin.read_handin(submission)


def test_a_2_gb_file_is_refused_before_it_is_read(packed) -> None:
    _, submission = packed
    with open(weights_path(submission), "r+b") as fh:
        fh.truncate(2 * 2 ** 30)                                            # sparse: no disk used
    with pytest.raises(HandInError, match=r"2048 MB, over the 16 MB"):
        handin.read_handin(submission)


def test_a_file_that_is_not_safetensors(packed) -> None:
    _, submission = packed
    weights_path(submission).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    with pytest.raises(HandInError, match="not a readable safetensors file"):
        handin.read_handin(submission)


def rewrite(submission: Path, change) -> None:
    state = read_state(submission)
    change(state)
    save_file(state, str(weights_path(submission)))


def test_nan_weights(packed) -> None:
    _, submission = packed
    rewrite(submission, lambda s: s["head.weight"].__setitem__((0, 0), float("nan")))
    with pytest.raises(HandInError, match="NaN or infinite in head.weight"):
        handin.read_handin(submission)


@pytest.mark.parametrize("change, expect", [
    (lambda s: s.pop("head.bias"), "missing head.bias"),
    (lambda s: s.__setitem__("head.extra", torch.zeros(2)), "unexpected head.extra"),
    (lambda s: s.__setitem__("head.weight", torch.zeros(3, s["head.weight"].shape[1])), r"wrong shapes: head.weight \(3,"),
])
def test_weights_that_do_not_fit_the_class(packed, change, expect: str) -> None:
    _, submission = packed
    rewrite(submission, change)
    got = handin.read_handin(submission)                                    # the files themselves are fine
    with pytest.raises(HandInError, match=expect):
        handin.build_model(got, impl="reference")


def test_a_vocabulary_of_another_run(packed) -> None:
    _, submission = packed
    vocab_file = submission / handin.FOLDER / handin.VOCAB
    vocab = json.loads(vocab_file.read_text())
    vocab["chars"] = vocab["chars"][:-5]
    vocab_file.write_text(json.dumps(vocab))
    with pytest.raises(HandInError, match="different runs"):
        handin.read_handin(submission)


def test_a_run_json_that_is_not_a_summary(packed) -> None:
    _, submission = packed
    (submission / handin.FOLDER / handin.RUN).write_text(json.dumps({"model": "transformer"}))
    with pytest.raises(HandInError, match="lacks the run's preset, size"):
        handin.read_handin(submission)


def test_an_lstm_run_is_not_the_capstone(packed) -> None:
    _, submission = packed
    run_file = submission / handin.FOLDER / handin.RUN
    run_file.write_text(json.dumps({**json.loads(run_file.read_text()), "model": "lstm"}))
    with pytest.raises(HandInError, match="hand in a `--model transformer` run"):
        handin.build_model(handin.read_handin(submission), impl="reference")


def test_float16_when_float32_would_pass_the_bound(packed, monkeypatch) -> None:
    run, submission = packed
    size = sum(t.numel() * t.element_size() for t in handin.weights_of(run).values())
    monkeypatch.setattr(handin, "MAX_BYTES", size - 1)
    shutil.rmtree(submission)
    handin.pack(run, submission, impl="reference")
    assert read_state(submission)["head.weight"].dtype == torch.float16
    monkeypatch.setattr(handin, "MAX_BYTES", size // 4)
    with pytest.raises(HandInError, match="even in float16"):
        handin.pack(run, submission, impl="reference")


# ------------------------------------------------------------------ `course submit ch08` carries the model
def test_submit_packs_the_run_and_hashes_it_in_the_manifest(packed, tmp_path: Path, monkeypatch) -> None:
    from functools import partial

    from course_lib.provided import submit
    monkeypatch.setattr(handin, "pack", partial(handin.pack, impl="reference"))  # the instructor's stubs
    manifest = submit.build("08", "pat", None, tmp_path / "sub", model_run=packed[0])
    files = {f"{handin.FOLDER}/{name}" for name in (handin.WEIGHTS, handin.RUN, handin.VOCAB)}
    assert files <= set(manifest["files"])
    assert handin.read_handin(tmp_path / "sub").run == json.loads((packed[0] / "summary.json").read_text())


def test_submit_with_the_learner_stubs_says_chapter_08_is_not_done(packed, tmp_path: Path) -> None:
    from course_lib.provided import submit
    with pytest.raises(submit.SubmitError, match="the trained model: .*not implemented yet"):
        submit.build("08", "pat", None, tmp_path / "sub", model_run=packed[0])


def test_submit_finds_the_best_run_or_says_what_to_do(packed, tmp_path: Path) -> None:
    from course_lib.provided import submit
    assert submit.trained_run("07", None, False, tmp_path) is None                 # not the capstone
    assert submit.trained_run("08", None, True, tmp_path) is None                  # --no-model
    with pytest.raises(submit.SubmitError, match="no finished fine-tuning run under .*--no-model"):
        submit.trained_run("08", None, False, tmp_path)
    shutil.copytree(packed[0], tmp_path / "runs" / "q" / "finetune-transformer-quick")
    assert submit.trained_run("08", None, False, tmp_path) == tmp_path / "runs" / "q" / "finetune-transformer-quick"


@pytest.mark.parametrize("key, value, said", [
    ("max_len", 10 ** 9, r"max_len 1000000000 is not the quick preset's \(128\)"),
    ("max_len", "128", "max_len '128' is not the quick preset's"),
    ("size", "huge", "size 'huge' is not the quick preset's"),
    ("dropout", 1.5, "dropout 1.5 is not a probability"),
    ("vocab_size", 10 ** 7, "vocab_size 10000000 is not a whole number"),
    # learner text that a report shows: refused, and named escaped (a newline could write a row of its own)
    ("preset", "quick\n1,000 parameters; weights 0123456789ab", r"preset 'quick\\n1,000 parameters; weights 012\.\.\. is none of"),
    ("seed", "0\nweights 0123456789ab", r"seed '0\\nweights 0123456789ab' is not a whole number"),
    ("device", "cpu\nverified", r"device 'cpu\\nverified' is not a device's name"),
])
def test_settings_are_bounded_before_a_model_is_built(packed, key: str, value, said: str) -> None:
    """A hostile run.json must not make the grader allocate what its settings ask (max_len 10**9: a positional
    table of hundreds of GB) or crash deep inside; each is named before anything is built."""
    _, submission = packed
    run_file = submission / handin.FOLDER / handin.RUN
    run_file.write_text(json.dumps({**json.loads(run_file.read_text()), key: value}))
    with pytest.raises(HandInError, match=said):
        handin.read_handin(submission)


def test_a_shape_without_bytes_builds_nothing(packed, tmp_path: Path) -> None:
    """Issue 41 (high): a tensor of shape [N, 0] holds no bytes, so the file passes every size check, and a model
    sized from it (the bigram embedding has len(embed.keys) + 1 rows) would be N x 128 floats. The shapes are
    compared on a skeleton first: refused, named, and the grader's own process stays small (measured in a child:
    its VmHWM, the peak of its own memory; getrusage's ru_maxrss would carry the parent's over exec)."""
    _, submission = packed
    rewrite(submission, lambda s: s.__setitem__("embed.keys", torch.empty(10 ** 8, 0, dtype=torch.long)))
    assert weights_path(submission).stat().st_size < 4 * 2 ** 20          # a few MB, like any quick hand-in
    script = (
        "import json, sys, time\nfrom pathlib import Path\n"
        "from course_admin.grading import trained\n"
        "from course_admin.intake.submissions import Reader\n"
        "from course_lib.provided.capstone.handin import HandInError\n"
        "start = time.perf_counter()\n"
        "try:\n"
        "    trained.measure(Reader(Path(sys.argv[1]))); said = 'measured'\n"
        "except HandInError as err:\n"
        "    said = str(err)\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(json.dumps({'said': said, 'seconds': time.perf_counter() - start, 'peak_mb': int(hwm) / 1024}))\n")
    (submission / "manifest.json").write_text(json.dumps({"learner": "oscar", "chapter": "08"}))
    done = subprocess.run([sys.executable, "-c", script, str(submission)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"a [10**8, 0] hand-in: {got['seconds']:.1f} s, peak {got['peak_mb']:.0f} MB")
    assert "wrong shapes: embed.keys (100000000, 0)" in got["said"], got["said"]
    assert got["peak_mb"] < 768                                             # N x 128 floats would be 51 GB


def test_safetensors_are_told_by_structure_not_by_a_first_byte(packed) -> None:
    """Issue 41 (low): a header of 128 mod 256 bytes makes a real safetensors file start with 0x80, a pickle's
    first byte. Such a file reads; a torch.save file is still named a pickle."""
    _, submission = packed
    state = read_state(submission)
    for pad in range(256):
        save_file(state, str(weights_path(submission)), metadata={"run": "r" * pad})
        data = weights_path(submission).read_bytes()
        if data[0] == 0x80:
            break
    assert data[0] == 0x80 and int.from_bytes(data[:8], "little") % 256 == 128
    assert handin.digest(handin.read_handin(submission).state) == handin.digest(state)
