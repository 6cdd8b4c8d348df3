"""The provided training harness (course_lib/provided/training.py) and the capstone's command on top of it.

Tiny models on CPU: repeatable runs, a resumed run equal bit for bit to one never stopped, checkpoints
that a crash cannot half-write, two processes under torchrun equal to one on the same global batch,
the LSTM classifier and the masked-LM masking, and `course capstone` end to end on the real reviews.
This file is also the script that torchrun starts for the two-process test (see the bottom).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.provided.capstone.batching import batch_order, collate
from course_lib.provided.capstone.mlm import IGNORE_INDEX, MaskedLM, mask_tokens, mlm_batches, mlm_loss
from course_lib.provided.capstone.models import LSTMClassifier, ModelUnavailable, build_classifier, masked_mean
from course_lib.provided.checkpoints import latest_checkpoint, list_checkpoints, save_checkpoint
from course_lib.provided.runtime import ProcessContext, seed_everything, shard_groups
from course_lib.provided.training import TrainConfig, TrainResult, train, warmup_cosine

pytestmark = [pytest.mark.training]

REPO = Path(__file__).resolve().parents[2]
# 24 points of a linearly separable task; batches of 8: 3 batches an epoch, so 6 steps cross an epoch boundary
POINTS = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
LABELS = (POINTS[:, 0] + POINTS[:, 1] > 0).long()


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and on shared cores the second thread costs several times over."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_model(seed: int = 0, dropout: float = 0.2) -> nn.Module:
    seed_everything(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 2))


def tiny_batches(epoch: int, ctx: ProcessContext) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for group in shard_groups(batch_order([1] * len(POINTS), 8, seed=0, epoch=epoch, bucket=False), ctx):
        yield POINTS[group], LABELS[group]


def tiny_loss(net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
    points, labels = batch
    return F.cross_entropy(net(points), labels), len(labels)


def tiny_train(model: nn.Module, steps: int = 6, out: Path | None = None, seed: int = 0, **options: object) -> TrainResult:
    config = TrainConfig(steps=steps, lr=0.05, checkpoint_every=2, seed=seed, progress=False, **options)
    return train(model, tiny_loss, tiny_batches, config, schedule=warmup_cosine(2, steps), out=out, device="cpu")


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ------------------------------------------------------------------ repeatability and resume
def test_a_seeded_run_repeats_and_another_seed_differs() -> None:
    first, again = tiny_train(tiny_model()).model, tiny_train(tiny_model()).model
    assert same_weights(first, again)
    assert not same_weights(first, tiny_train(tiny_model(), seed=1).model)  # dropout draws from the seed


def test_a_killed_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    straight = tiny_train(tiny_model(), out=tmp_path / "straight")
    calls = 0

    def killed_in_step_5(net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
        nonlocal calls
        calls += 1
        if calls == 5:
            raise KeyboardInterrupt  # as if killed mid-step, after the checkpoint of step 4 (epoch 1, batch 1)
        return tiny_loss(net, batch)

    config = TrainConfig(steps=6, lr=0.05, checkpoint_every=2, progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_model(), killed_in_step_5, tiny_batches, config, schedule=warmup_cosine(2, 6),
              out=tmp_path / "killed", device="cpu")
    assert [step for step, _ in list_checkpoints(tmp_path / "killed" / "checkpoints")] == [4, 2]
    resumed = tiny_train(tiny_model(seed=99), out=tmp_path / "killed")  # other initial weights: all overwritten
    assert resumed.resumed_from == 4 and resumed.step == 6
    assert same_weights(resumed.model, straight.model)  # bitwise: weights, optimizer, schedule and RNG restored
    steps = [(r["split"], r["step"]) for r in map(json.loads, (tmp_path / "killed" / "metrics.jsonl").open())]
    assert len(steps) == len(set(steps))  # nothing logged twice
    again = tiny_train(tiny_model(seed=5), out=tmp_path / "killed")  # finished: the same command trains no more
    assert again.resumed_from == 6 and same_weights(again.model, straight.model)


def test_a_checkpoint_of_other_settings_is_refused(tmp_path: Path) -> None:
    tiny_train(tiny_model(), steps=2, out=tmp_path)
    with pytest.raises(ValueError, match="other settings"):
        tiny_train(tiny_model(), steps=4, out=tmp_path)  # the schedule depends on steps: no silent mix


# ------------------------------------------------------------------ checkpoints
def test_a_truncated_or_unfinished_checkpoint_is_never_picked(tmp_path: Path) -> None:
    for step in (2, 4):
        save_checkpoint(tmp_path, step, {"step": step, "model": {"w": torch.full((1000,), float(step))}}, keep=5)
    newest = tmp_path / "step-00000004.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a copy cut short
    (tmp_path / ".step-00000006.pt.123.tmp").write_bytes(b"half written")  # a writer killed mid-way
    with pytest.warns(UserWarning, match="damaged"):
        path, state = latest_checkpoint(tmp_path)
    assert path.name == "step-00000002.pt" and state["step"] == 2


def test_a_crash_while_saving_leaves_the_old_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_checkpoint(tmp_path, 2, {"step": 2, "model": {}})

    def crash(obj: object, handle: object) -> None:
        handle.write(b"PK partial")  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, 4, {"step": 4, "model": {}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000002.pt"]  # no final file, no leftover


# ------------------------------------------------------------------ the LSTM classifier
def test_lstm_excludes_padding_and_learns_a_tiny_task() -> None:
    seed_everything(0)
    model = LSTMClassifier(vocab_size=12, d_embed=16, d_hidden=16, dropout=0.0).eval()
    tokens = torch.tensor([[5, 6, 7]])
    padded = torch.tensor([[5, 6, 7, 0, 0, 0, 0]])
    for pooling in ("mean", "last"):
        model.pooling = pooling
        torch.testing.assert_close(model(tokens, tokens != 0), model(padded, padded != 0), rtol=0, atol=1e-6)
    assert torch.equal(masked_mean(torch.ones(1, 3, 2), torch.tensor([[True, False, False]])), torch.ones(1, 2))
    # label: does token 4 occur? (lengths 2-9, padded with 0)
    generator = torch.Generator().manual_seed(1)
    examples = []
    for _ in range(256):
        ids = torch.randint(4, 12, (int(torch.randint(2, 10, (1,), generator=generator)),), generator=generator)
        examples.append((ids.tolist(), int((ids == 4).any())))
    train_set, test_set = examples[:192], examples[192:]

    def batches(epoch: int, ctx: ProcessContext) -> Iterator[object]:
        for group in batch_order([len(ids) for ids, _ in train_set], 32, seed=0, epoch=epoch):
            yield collate([train_set[i] for i in group], 0)

    def loss_fn(net: nn.Module, batch: object) -> tuple[torch.Tensor, int]:
        return F.cross_entropy(net(batch.tokens, batch.tokens != 0), batch.labels), len(batch.labels)

    result = train(LSTMClassifier(12, d_embed=16, d_hidden=16, dropout=0.0), loss_fn, batches,
                   TrainConfig(steps=120, lr=0.01, progress=False), device="cpu")
    test = collate(test_set, 0)
    with torch.no_grad():
        accuracy = (result.model.eval()(test.tokens, test.tokens != 0).argmax(-1) == test.labels).float().mean()
    assert accuracy > 0.9, f"the LSTM did not learn 'token 4 occurs' ({accuracy:.0%} on held-out sequences)"


def test_the_transformer_hook_says_chapter_08_is_missing() -> None:
    with pytest.raises(ModelUnavailable, match="chapter 08 not implemented yet"):
        build_classifier("transformer", vocab_size=20)


# ------------------------------------------------------------------ masked-LM pretraining
def test_mlm_masking_spares_specials_and_chooses_15_percent() -> None:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 50, (400, 256), generator=generator)
    tokens[:, 0] = 2                  # <cls>
    tokens[::3, 200:] = 0             # padding
    tokens[:, 100] = 1                # <unk>
    inputs, targets = mask_tokens(tokens, mask_id=3, vocab_size=50, special_ids={0, 1, 2, 3},
                                  generator=torch.Generator().manual_seed(7))
    special = tokens < 4
    chosen = targets != IGNORE_INDEX
    assert not chosen[special].any() and torch.equal(inputs[special], tokens[special])
    assert torch.equal(targets[chosen], tokens[chosen]) and torch.equal(inputs[~chosen], tokens[~chosen])
    assert abs(chosen.sum() / (~special).sum() - 0.15) < 0.005
    masked, kept = (inputs[chosen] == 3).float().mean(), (inputs[chosen] == tokens[chosen]).float().mean()
    assert abs(masked - 0.8) < 0.01 and abs(kept - 0.1 - 1 / 46 * 0.1) < 0.01  # a random draw may hit itself
    assert (inputs[chosen & (inputs != 3)] >= 4).all()  # random replacements are never specials
    again = mask_tokens(tokens, 3, 50, {0, 1, 2, 3}, torch.Generator().manual_seed(7))
    assert torch.equal(again[0], inputs) and torch.equal(again[1], targets)
    assert mlm_loss(torch.randn(5, 50), torch.full((5,), IGNORE_INDEX)).item() == 0.0  # no NaN


def test_mlm_loss_trains_an_encoder_through_the_harness() -> None:
    from course_lib.provided.capstone.vocab import CharVocab
    vocab = CharVocab(list("abcdefgh"))
    chunks = [list(vocab.encode("abcdefgh"[i:] + "abcdefgh"[:i])) for i in range(8)] * 8
    seed_everything(0)
    mlm = MaskedLM(LSTMClassifier(len(vocab), d_embed=16, d_hidden=16, dropout=0.0), len(vocab))
    result = train(mlm, lambda net, b: (net(b.inputs, b.mask, b.targets), len(b.inputs)),
                   lambda epoch, ctx: mlm_batches(chunks, 16, vocab, epoch=epoch, prob=0.3),
                   TrainConfig(steps=150, lr=0.01, progress=False), device="cpu")
    batch = next(mlm_batches(chunks, 64, vocab, seed=3, prob=0.3))
    with torch.no_grad():
        loss = result.model.eval()(batch.inputs, batch.mask, batch.targets)
    assert loss < 0.5, f"masked characters of a cyclic alphabet not learned: loss {loss:.2f} (chance: {torch.log(torch.tensor(8.)):.2f})"


# ------------------------------------------------------------------ two processes under torchrun
def test_two_processes_match_one_on_the_same_global_batch(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           __file__, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    _, state = latest_checkpoint(tmp_path / "checkpoints")
    assert len(state["rng"]) == 2  # two ranks saved their generators: it really ran twice
    seen = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rows_0, rows_1 in zip(*seen):  # each step: half of the global batch each, never the same row
        assert len(rows_0) == len(rows_1) == 4 and not set(rows_0) & set(rows_1)
    alone = tiny_train(tiny_model(dropout=0.0), steps=4, out=tmp_path / "alone").model  # one process, batches of 8
    for name, weight in alone.state_dict().items():
        torch.testing.assert_close(state["model"][name], weight, rtol=0, atol=1e-6)
    logged = [[r["loss"] for r in map(json.loads, (folder / "metrics.jsonl").open()) if r["split"] == "train"]
              for folder in (tmp_path, tmp_path / "alone")]
    assert logged[0] == pytest.approx(logged[1], rel=1e-6, abs=1e-7)  # the global batch's loss, not rank 0's half
    first = tiny_train(tiny_model(dropout=0.0), steps=1).model  # and the weights did move
    assert not same_weights(first, tiny_model(dropout=0.0))


# ------------------------------------------------------------------ `course capstone`
def test_course_capstone_help() -> None:
    done = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "capstone", "--help"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0
    for command in ("baselines", "pretrain", "finetune", "evaluate", "plot", "record"):
        assert command in done.stdout


def test_course_capstone_quick_lstm_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from course_lib.provided.capstone.baselines import BASELINES
    from course_lib.provided.capstone.run import main
    cached = [dict(name=name, valid_accuracy=0.111, test_accuracy=0.222, seconds=0.0) for name in BASELINES]
    (tmp_path / "baselines.json").write_text(json.dumps({"split_sizes": [13_870, 1_727, 1_723], "results": cached}))
    command = ["finetune", "--quick", "--model", "lstm", "--steps", "4", "--eval-every", "2", "--out",
               str(tmp_path), "--no-progress"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "| TF-IDF (char 1-3) + LR | 11.1% | 22.2% |" in printed  # the cache was read, not refitted
    folder = tmp_path / "finetune-lstm-quick"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["steps"] == 4 and 0.3 < summary["test_accuracy"] < 0.8 and summary["examples_per_second"] > 0
    best = summary["best_valid"]  # chosen on valid among steps 2 and 4: the best valid accuracy of the metrics
    valid = [r for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()) if r["split"] == "valid"]
    assert best["valid_accuracy"] == max(r["valid_accuracy"] for r in valid) and best["step"] in (2, 4)
    assert f"(best valid, step {best['step']})" in printed and 0.3 < best["test_accuracy"] < 0.8
    assert f"**{summary['test_accuracy']:.1%}**" in printed
    assert [step for step, _ in list_checkpoints(folder / "checkpoints")] == [4, 2]
    assert main(command) == 0  # the same command again: resumes at the end, trains nothing
    assert json.loads((folder / "summary.json").read_text())["resumed_from"] == 4
    assert main(["evaluate", "--quick", "--out", str(tmp_path), "--show", "2"]) == 0
    assert f"**{summary['test_accuracy']:.1%}**" in capsys.readouterr().out  # the same model, evaluated again
    assert main(["plot", "--out", str(tmp_path)]) == 0 and (tmp_path / "plots" / "finetune.png").stat().st_size
    assert main(["finetune", "--quick", "--model", "transformer", "--out", str(tmp_path)]) == 2
    assert "chapter 08 not implemented yet" in capsys.readouterr().err


def _worker(out: Path) -> None:
    """One rank of the two-process test: train, and record the rows of each batch it computed."""
    rows: list[list[float]] = []

    def recording_loss(net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
        rows.append(batch[0][:, 0].tolist())
        return tiny_loss(net, batch)

    config = TrainConfig(steps=4, lr=0.05, checkpoint_every=2, progress=False)
    train(tiny_model(dropout=0.0), recording_loss, tiny_batches, config, schedule=warmup_cosine(2, 4), out=out,
          device="cpu")
    (out / f"rank{os.environ['RANK']}.json").write_text(json.dumps(rows))


if __name__ == "__main__":  # torchrun's worker for test_two_processes_match_one_on_the_same_global_batch
    _worker(Path(sys.argv[1]))


def test_course_capstone_record_reports_each_run_and_its_time_to_the_tfidf_bar(tmp_path: Path) -> None:
    """Planted runs whose numbers were chosen by hand: pretraining took 100 steps of 64 at 64 examples/s
    (100 s) then 100 at 128/s (50 s); the pretrained fine-tuning passes TF-IDF's valid 80% at step 200 of
    400, whose 200 s make 100 s, so 250 s in all; the run from scratch never passes it."""
    from course_lib.provided.capstone.baselines import BASELINES
    from course_lib.provided.capstone.run import main
    cached = [dict(name=name, valid_accuracy=0.80, test_accuracy=0.81, seconds=0.0) for name in BASELINES]
    (tmp_path / "baselines.json").write_text(json.dumps({"split_sizes": [13_870, 1_727, 1_723], "results": cached}))
    with pytest.raises(SystemExit, match="no finished fine-tuning run"):
        main(["record", "--out", str(tmp_path), "--to", str(tmp_path / "record.json")])

    def run(name: str, records: list[dict], summary: dict | None = None) -> Path:
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        if summary is not None:
            (tmp_path / name / "summary.json").write_text(json.dumps(summary))
        return tmp_path / name

    pre = run("pretrain-transformer", [{"step": 100, "split": "train", "examples_per_s": 64.0},
                                       {"step": 200, "split": "train", "examples_per_s": 128.0},
                                       {"step": 200, "split": "valid", "valid_mlm_accuracy": 0.3}])
    valid = lambda *pairs: [{"step": s, "split": "valid", "valid_accuracy": a} for s, a in pairs]  # noqa: E731
    run("finetune-pretrained", valid((100, 0.75), (200, 0.81), (400, 0.84)),
        {"steps": 400, "train_seconds": 200.0, "valid_accuracy": 0.84, "test_accuracy": 0.85,
         "pretrained": str(pre.resolve())})
    run("finetune-scratch", valid((100, 0.70), (200, 0.79)),
        {"steps": 200, "train_seconds": 90.0, "valid_accuracy": 0.79, "test_accuracy": 0.78})
    assert main(["record", "--out", str(tmp_path), "--to", str(tmp_path / "record.json")]) == 0
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["pretrain"][0]["train_seconds_estimated"] == pytest.approx(150.0)
    assert record["pretrain"][0]["valid_mlm_accuracy"] == 0.3
    by_name = {r["name"]: r for r in record["finetune"]}
    assert by_name["finetune-pretrained"]["beats_tfidf_valid_at_step"] == 200
    assert by_name["finetune-pretrained"]["seconds_to_beat_tfidf_valid"] == pytest.approx(250.0)
    assert by_name["finetune-pretrained"]["pretrained_with"] == "pretrain-transformer"
    assert by_name["finetune-scratch"]["beats_tfidf_valid_at_step"] is None
    assert record["versions"]["torch"] == torch.__version__ and record["hardware"]["cpu_count"] == os.cpu_count()
    assert record["recorded"][:4].isdigit() and [b["name"] for b in record["baselines"]] == list(BASELINES)
