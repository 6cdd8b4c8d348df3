"""Seed 000's whole classifier, submitted as is to chapter 08's checks, loses points with the chapter's messages.

solutions/mistakes/ch08_seed000.py transcribes the seed's MiniTransformerClassifier (adapted only to the
contract's names, so that the checks can load weights into it). It carries several mistakes at once, so
its logits match no single known-wrong variant; the cases that test one thing at a time must still name
each of its mistakes: the pooling (masked_mean cases), the missing padding mask (encode at the real
positions with more padding) and the missing √d_model scale (a model with no encoder layer and no padding).
"""
from __future__ import annotations

import inspect

import pytest
import torch

from course_lib.provided import chapters
from course_lib.provided.checking import ready_made_uses, total
from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import PatchedImpl, load_file, load_impl

SEED = load_file("course_seed000_ch08", LAYOUT.root / "solutions" / "mistakes" / "ch08_seed000.py")
SPEC = chapters.load_spec("08")


@pytest.fixture(scope="module")
def results():
    impl = PatchedImpl(load_impl("reference"), {"classifier.TransformerClassifier": SEED.TransformerClassifier,
                                                "classifier.masked_mean": SEED.masked_mean}, label="seed 000")
    return {r.case: r for r in chapters.run_chapter("08", impl)}


@pytest.mark.parametrize("mistake,case", [
    ("padding_in_pool", "masked_mean leaves padding out"),
    ("padding_in_pool", "masked_mean: a row of padding only gives zeros"),
    ("no_padding_mask", "attention ignores padding"),
    ("no_sqrt_scale", "no encoder layers, no padding: embeddings × √d_model"),
    ("pre_ln_without_final_norm", "the encoder ends with a layer norm"),  # its text says Post-LN (issue 20)
])
def test_seed_000_is_named_by_each_of_its_mistakes(results, mistake: str, case: str) -> None:
    result = results[case]
    assert result.status == "fail" and result.earned == 0
    assert mistake in result.mistakes, (case, result.mistakes, result.message)
    assert SPEC.MISTAKES[mistake] in result.message


def test_seed_000_fails_every_logit_case_and_padding_probe(results) -> None:
    for case in ("logits of a padded batch (Post-LN)", "logits of a padded batch (Pre-LN)",
                 "more padding changes no logit"):
        assert results[case].status == "fail", case
    named = results["more padding changes no logit"].mistakes  # each changes the logits with more padding: "Or:"
    assert set(named) == {"padding_in_pool", "no_padding_mask", "mean_over_full_length"}, named
    earned, possible = total(list(results.values()))
    assert earned <= 1.0 < possible  # only the float64 dtype of its (wrong) pooling and the empty-row finiteness


def test_seed_000_source_uses_ready_made_layers() -> None:
    """Graded from its source, the seed loses "built from scratch" too: nn.AdaptiveAvgPool1d and nn.LayerNorm."""
    uses = [u.split(" (line")[0] for u in ready_made_uses(inspect.getsource(SEED), SPEC.READY_MADE["classifier.py"])]
    assert "torch.nn.AdaptiveAvgPool1d" in uses and "torch.nn.LayerNorm" in uses, uses


def test_seed_000_pooling_changes_with_padding() -> None:
    """The bug the page measures: the same review gives other logits once the batch is padded further."""
    torch.manual_seed(0)
    model = SEED.TransformerClassifier(vocab_size=20, d_model=16, num_heads=4, d_ff=32, num_layers=2).eval()
    fixed = load_impl("reference").classifier.TransformerClassifier(20, 16, 4, 32, 2).eval()
    tokens = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, 0, 0, 0, 0]])
    with torch.no_grad():
        assert not torch.allclose(model(tokens), model(padded), atol=1e-4)
        torch.testing.assert_close(fixed(tokens), fixed(padded), rtol=1e-5, atol=1e-5)


def test_seed_000_messages_say_what_it_does(results) -> None:
    """Issue 20: finite logits get no hint about -inf or NaN, and a missing parameter names a few, not all."""
    finite = results["a row of padding only stays finite"]
    assert finite.status == "fail" and "values differ" in finite.message
    assert "finite number" not in finite.message and "NaN" not in finite.message, finite.message
    missing = results["logits of a padded batch (Pre-LN)"].message
    assert "has no parameter encoder.norm.weight" in missing and missing.count("encoder.layers.") <= 4, missing


def test_seed_000_is_not_told_to_fix_chapters_it_does_not_use(tmp_path, monkeypatch) -> None:
    """The seed's classifier.py imports none of chapters 02-05: stub earlier chapters are not its problem; the
    reference's classifier.py uses all four (through the encoder), and would be told."""
    from course_lib.provided.check import used_chapters
    from course_lib.provided.loader import Impl

    (tmp_path / "seed_learner").mkdir()
    (tmp_path / "seed_learner" / "__init__.py").write_text("")
    (tmp_path / "seed_learner" / "classifier.py").write_text(inspect.getsource(SEED))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert used_chapters("08", Impl("seed_learner", "seed 000")) == set()
    assert used_chapters("08", load_impl("reference")) == {"02", "03", "04", "05"}
    assert used_chapters("08", load_impl("learner")) == {"02", "03", "04", "05"}  # the stubs keep their imports
