"""`course capstone` as an instructor and a learner run it: the reference, threads, resumes, bigram inputs.

Each test here failed before the change it covers (issue 20): the capstone's transformer could not be
trained with the reference in the instructor's repository, a resume with another thread count broke
bitwise resume silently, a resumed run counted only its own part of the time, and so on.
"""
from __future__ import annotations

import json
from pathlib import Path
import pytest
import torch

from course_lib.provided.capstone.baselines import BASELINES
from course_lib.provided.capstone.models import BigramInput, add_bigrams, build_classifier
from course_lib.provided.capstone.run import main
from course_lib.provided.capstone.vocab import CharVocab, bigram_keys
from course_lib.provided.checkpoints import latest_checkpoint
from course_lib.provided.loader import load_impl

from .test_training import one_thread  # noqa: F401 - autouse: tiny models, one thread

pytestmark = [pytest.mark.training]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A run folder whose cached baselines are planted (no 35 s fit)."""
    cached = [dict(name=name, valid_accuracy=0.111, test_accuracy=0.222, seconds=0.0) for name in BASELINES]
    (tmp_path / "baselines.json").write_text(json.dumps({"split_sizes": [13_870, 1_727, 1_723], "results": cached}))
    return tmp_path


@pytest.mark.slow
def test_the_reference_classifier_trains_through_the_command(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = ["finetune", "--model", "transformer", "--quick", "--impl", "reference", "--steps", "2",
               "--eval-every", "2", "--out", str(out), "--no-progress"]
    assert main(command) == 0
    summary = json.loads((out / "finetune-transformer-quick" / "summary.json").read_text())
    assert summary["impl"] == "reference" and summary["threads"] == 1 and summary["steps"] == 2
    assert "on cpu, 1 thread" in capsys.readouterr().out  # the thread count is printed
    assert main(["evaluate", "--model", "transformer", "--quick", "--out", str(out), "--show", "1"]) == 0
    assert f"**{summary['test_accuracy']:.1%}**" in capsys.readouterr().out  # rebuilt with the saved impl
    learner = ["finetune", "--model", "transformer", "--quick", "--out", str(out / "learner"), "--steps", "2"]
    assert main(learner) == 2  # the stubs: says so, and where the reference is
    assert "--impl reference" in capsys.readouterr().err


def test_threads_are_saved_restored_on_resume_and_another_count_is_refused(out: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    command = ["finetune", "--model", "lstm", "--quick", "--steps", "2", "--eval-every", "1", "--out", str(out),
               "--no-progress"]
    assert main([*command, "--threads", "2"]) == 0
    _, state = latest_checkpoint(out / "finetune-lstm-quick" / "checkpoints")
    assert state["settings"]["train"]["threads"] == 2
    assert main(command) == 0  # no --threads: the saved count is restored, not the default of 1
    printed = capsys.readouterr().out
    assert "resumed from step 2" in printed and "2 threads" in printed
    assert main([*command, "--threads", "1"]) == 2  # a settings clash: one line naming what differs, no traceback
    err = capsys.readouterr().err
    assert "train.threads: saved 2, now 1" in err and "another --out" in err and len(err.strip().splitlines()) == 1
    assert main(["record", "--out", str(out), "--to", str(out / "record.json")]) == 0  # this process: 1 thread
    assert json.loads((out / "record.json").read_text())["hardware"]["torch_threads"] == 2  # what the run used


def test_a_resumed_run_counts_the_whole_run(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = ["finetune", "--model", "lstm", "--quick", "--eval-every", "2", "--out", str(out), "--no-progress"]
    assert main([*command, "--steps", "2"]) == 0
    first = json.loads((out / "finetune-lstm-quick" / "summary.json").read_text())
    folder = out / "finetune-lstm-quick"
    # the same run, longer: what a killed run of 4 steps resumed at step 2 does (settings must match)
    _, state = latest_checkpoint(folder / "checkpoints")
    state["settings"]["run"]["steps"] = state["settings"]["train"]["steps"] = 4  # the warmup stays 1 step
    torch.save(state, next((folder / "checkpoints").glob("step-*.pt")))
    assert main([*command, "--steps", "4"]) == 0
    assert "resumed from step 2" in capsys.readouterr().out
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["resumed_from"] == 2 and summary["train_seconds"] > first["train_seconds"]
    examples = summary["examples_per_second"] * summary["train_seconds"]
    _, state = latest_checkpoint(folder / "checkpoints")
    assert state["step"] == 4 and examples == pytest.approx(state["examples"])
    assert examples > 2 * 64  # all four steps (one may be an epoch's short last batch), not the resumed two


def test_bigram_inputs_look_up_known_pairs_and_follow_the_input() -> None:
    vocab = CharVocab(list("好很不错"))
    hen, hao, bu = (vocab.encode(c)[0] for c in "很好不")
    code = lambda a, b: a * len(vocab) + b  # noqa: E731
    keys = bigram_keys(["很好很好", "很好很好", "不错"], vocab, min_freq=2)  # seen twice: (pad 很) (很 好) (好 很)
    assert keys == sorted([code(vocab.pad_id, hen), code(hen, hao), code(hao, hen)])
    torch.manual_seed(0)
    embed = BigramInput(torch.nn.Embedding(len(vocab), 8), torch.tensor(keys), len(vocab), 8, vocab.pad_id)
    tokens = torch.tensor([vocab.encode("很好很不")])                                 # (1, 4)
    with torch.no_grad():
        out = embed(tokens) - embed.token(tokens)                                   # (1, 4, 8): the bigram part
    rows = embed.bigram.weight * 8 ** 0.5
    known = [1 + keys.index(code(vocab.pad_id, hen)), 1 + keys.index(code(hen, hao)), 1 + keys.index(code(hao, hen)), 0]
    torch.testing.assert_close(out[0], rows[torch.tensor(known)])                   # the last pair (很 不): unknown
    masked = tokens.clone()
    masked[0, 1] = vocab.mask_id                                                    # a masked character
    with torch.no_grad():
        moved = (embed(masked) - embed(tokens)).abs().sum(-1)[0].tolist()           # (4,)
    assert moved[0] == 0 and moved[1] > 0 and moved[2] > 0 and moved[3] == 0       # its own pairs change, no other


def test_bigrams_join_the_reference_classifier_and_its_padding_still_changes_nothing() -> None:
    torch.manual_seed(0)
    model = build_classifier("transformer", 12, pad_id=0, size="quick", max_len=16, impl="reference")
    model = add_bigrams(model, [4 * 12 + 5, 5 * 12 + 6], 12).eval()
    review = torch.tensor([[4, 5, 6, 7]])
    padded = torch.tensor([[4, 5, 6, 7, 0, 0, 0]])
    with torch.no_grad():
        torch.testing.assert_close(model(review), model(padded), rtol=0, atol=1e-5)
    assert isinstance(model, load_impl("reference").classifier.TransformerClassifier)


@pytest.mark.slow
def test_seeds_make_an_ensemble_of_best_valid_members(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = ["finetune", "--model", "lstm", "--quick", "--seeds", "2", "--steps", "2", "--eval-every", "1",
               "--out", str(out), "--no-progress"]
    assert main(command) == 0
    folder = out / "finetune-lstm-quick"
    summary = json.loads((folder / "summary.json").read_text())
    members = [json.loads((folder / f"seed-{seed}" / "summary.json").read_text()) for seed in (0, 1)]
    assert [m["seed"] for m in members] == [0, 1] and members[0]["best_valid"] != members[1]["best_valid"]
    assert [m["valid_accuracy"] for m in summary["members"]] == [m["best_valid"]["valid_accuracy"] for m in members]
    assert summary["train_seconds"] == pytest.approx(sum(m["train_seconds"] for m in members))
    assert f"ensemble of 2** | **{summary['valid_accuracy']:.1%}** | **{summary['test_accuracy']:.1%}**" in \
        capsys.readouterr().out
    assert main(["evaluate", "--model", "lstm", "--quick", "--out", str(out), "--show", "1"]) == 0
    assert f"**{summary['test_accuracy']:.1%}**" in capsys.readouterr().out  # the same ensemble, evaluated again
    assert main(command) == 0 and "resumed from step 2" in capsys.readouterr().out  # finished members: not retrained
    torch.set_num_threads(2)  # the recording process's count is not the runs' (the fixture restores it)
    assert main(["record", "--out", str(out), "--to", str(out / "record.json")]) == 0
    record = json.loads((out / "record.json").read_text())
    assert record["hardware"]["torch_threads"] == 1 and record["finetune"][0]["members"] == summary["members"]



def test_without_quick_a_cpu_trains_the_cpu_preset() -> None:
    from course_lib.provided.capstone.run import parser
    from course_lib.provided.capstone.stages import run_folder, settings
    args = parser().parse_args(["finetune", "--model", "transformer", "--device", "cpu"])
    run = settings(args, "finetune")
    assert (run["preset"], run["bigrams"], run["seeds"], run["size"]) == ("cpu", 5, 5, "quick")
    assert run_folder(args, "finetune").name == "finetune-transformer-cpu"
    quick = settings(parser().parse_args(["finetune", "--quick", "--bigrams", "2"]), "finetune")
    assert (quick["preset"], quick["bigrams"], quick["seeds"]) == ("quick", 2, 1)  # an option beats the preset
    lstm = settings(parser().parse_args(["finetune", "--model", "lstm", "--device", "cpu"]), "finetune")
    assert (lstm["preset"], lstm["bigrams"]) == ("cpu", 0)  # the preset's bigram inputs are the transformer's


@pytest.mark.slow
def test_bigram_inputs_pretrain_then_fine_tune_with_the_pretrained_pairs(out: Path) -> None:
    common = ["--model", "transformer", "--preset", "cpu", "--impl", "reference", "--steps", "2", "--eval-every", "2",
              "--batch-size", "8", "--out", str(out), "--no-progress"]
    assert main(["pretrain", *common]) == 0
    _, pretrained = latest_checkpoint(out / "pretrain-transformer-cpu" / "checkpoints")
    keys = pretrained["model"]["encoder.embed.keys"]  # the pairs of news + train reviews seen 5 times
    assert pretrained["settings"]["run"]["bigrams"] == 5 and len(keys) > 10_000
    assert main(["finetune", *common, "--seeds", "1", "--pretrained", str(out / "pretrain-transformer-cpu")]) == 0
    _, tuned = latest_checkpoint(out / "finetune-transformer-cpu" / "checkpoints")
    assert torch.equal(tuned["model"]["embed.keys"], keys) and tuned["settings"]["run"]["bigrams"] == "pretrained"


def test_quick_mode_checkpoints_twice_as_often_as_it_evaluates() -> None:
    """A kill on a shared 2-core machine loses at most 100 steps of the quick mode (about 25 s of CPU), while
    the evaluations, and with them the best-valid checkpoint, stay every 200 steps."""
    from course_lib.provided.capstone.run import parser
    from course_lib.provided.capstone.stages import settings, train_config

    args = parser().parse_args(["finetune", "--model", "transformer", "--quick"])
    config = train_config(settings(args, "finetune"), args)
    assert (config.eval_every, config.checkpoint_every) == (200, 100)
    args = parser().parse_args(["finetune", "--model", "transformer", "--preset", "cpu"])
    config = train_config(settings(args, "finetune"), args)
    assert config.checkpoint_every == config.eval_every == 100
