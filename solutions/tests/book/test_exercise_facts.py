"""Each exercise notebook's experiment shows what its written question asks about.

A written question asks the learner to explain what an experiment of the notebook showed; if the experiment
cannot show it, the question grades an answer the learner cannot see (issue 27: chapter 02's heatmap drew
queries equal to keys, so its rows were one-hot with the scale as without it; chapter 07's "held-out" dates
included 124 sentences of the training set). These tests run the experiment cells of the solved source
notebooks, with the reference implementation as the learner's `course_lib`, and assert the facts each question
relies on. They run the cells' own code (nothing copied here), so a notebook edited into a broken experiment
fails here.

Every chapter's notebook is checked: chapter 01's plot shows the distances its model answer reads off (1% of
the last input's influence at about 7 positions for g = 0.5 and about 30 for g = 1; growth at g = 3);
chapter 03's hand-built heads answer where "on" and "sat" look (review finding 29); chapter 04's swap
experiment shows equivariance without positions and none with them, and the scales its second answer
compares hold; chapter 05's gradient figure shows what its model answer describes (Post-LN growing towards
the output, more so at depth 24; Pre-LN not); chapter 06's masks and future-leak probe show what the learner
is asked to predict, and the probe shows the leak the page tells the learner to plant; chapter 08's padding
experiment moves the scores with a plain mean only, and the corpus numbers its answers quote hold.

Run on the notebooks of commit cb33fb5 (before the fixes), the chapter 02 and chapter 07 tests fail.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import pytest
import torch

from course_lib.provided.layout import LAYOUT, REFERENCE_PACKAGE

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SOURCES = LAYOUT.root / "solutions" / "source"
CH02 = SOURCES / "ch02_attention" / "ch02_attention.ipynb"
CH07 = SOURCES / "ch07_training" / "ch07_training.ipynb"


def cell_code(notebook: Path, cell_id: str) -> str:
    """The source of one code cell, found by its id."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = [c for c in cells if c.get("id") == cell_id and c["cell_type"] == "code"]
    assert len(found) == 1, f"{notebook.name}: no single code cell {cell_id!r}"
    source = found[0]["source"]
    return "".join(source) if isinstance(source, list) else source


def as_reference(code: str) -> str:
    """The cell with the reference standing in for the learner's chapter modules (course_lib.provided stays)."""
    return re.sub(r"\bcourse_lib\.(?!provided\b)(\w+)", rf"{REFERENCE_PACKAGE}.\1", code)


def run_cell(code: str, namespace: dict | None = None) -> dict:
    """Execute ``code`` as a notebook cell would, figures drawn off screen and closed."""
    namespace = {} if namespace is None else namespace
    shown = plt.show
    plt.show = lambda *a, **k: None
    try:
        exec(compile(as_reference(code), "<notebook cell>", "exec"), namespace)
    finally:
        plt.show = shown
        plt.close("all")
    return namespace


def with_setting(code: str, name: str, value: str) -> str:
    """The cell with its setting ``name = ...`` (one line of its own) changed, as the learner is told to."""
    changed, n = re.subn(rf"^{name} = .*?(?=\s*(#|$))", f"{name} = {value}", code, count=1, flags=re.M)
    assert n == 1, f"the cell has no line `{name} = ...` to change"
    return changed


# ------------------------------------------------------------------ chapter 02: the heatmap with and without the scale
@pytest.fixture(scope="module")
def ch02_weights() -> dict[bool, torch.Tensor]:
    code = cell_code(CH02, "workbook-heatmap")
    return {scale: run_cell(with_setting(code, "scale", str(scale)))["weights"].detach() for scale in (True, False)}


def test_ch02_the_scaled_rows_are_soft(ch02_weights) -> None:
    """The question asks what changed without the scale: with it, the rows must spread their weight."""
    peak = ch02_weights[True].max(-1).values[1:]  # row 0 has only itself to attend to under the causal mask
    assert peak.mean() < 0.7, f"scaled rows are nearly one-hot already: largest weights {peak.tolist()}"
    assert peak.max() < 0.9, f"a scaled row is nearly one-hot: largest weights {peak.tolist()}"


def test_ch02_the_unscaled_rows_are_nearly_one_hot(ch02_weights) -> None:
    peak = ch02_weights[False].max(-1).values
    assert peak.min() > 0.95, f"unscaled rows are not nearly one-hot: largest weights {peak.tolist()}"


def test_ch02_the_rows_are_attention_weights(ch02_weights) -> None:
    for weights in ch02_weights.values():
        torch.testing.assert_close(weights.sum(-1), torch.ones(len(weights)))
        assert torch.equal(weights.triu(1), torch.zeros_like(weights)), "the causal mask let a row see the future"


# ------------------------------------------------------------------ chapter 07: the dates experiment's data
def ch07_data() -> dict:
    """Cell ch07-10 up to its model, after the cell before it (its imports): the dates, the vocabularies and
    the train and held-out tensors."""
    code = cell_code(CH07, "ch07-10")
    head, sep, _ = code.partition("\ntorch.manual_seed(0)\nmodel = ")
    assert sep, "cell ch07-10 no longer builds its model after `torch.manual_seed(0)`"
    return run_cell(head, run_cell(cell_code(CH07, "ch07-08")))


def test_ch07_no_held_out_date_occurs_in_training() -> None:
    """The exact match is measured on held-out dates: none of their source sentences may be a training one."""
    data = ch07_data()
    train = {tuple(row[row != data["PAD"]].tolist()) for row in data["train_src"]}
    test = [tuple(row[row != data["PAD"]].tolist()) for row in data["test_src"]]
    assert len(test) == 1_000
    overlap = sum(sentence in train for sentence in test)
    assert overlap == 0, f"{overlap} of the {len(test)} held-out sentences occur in training"


def test_ch07_the_held_out_targets_are_the_dates_of_their_sentences() -> None:
    """Filtering kept each sentence with its own ISO date (the pairs were not shuffled apart)."""
    data = ch07_data()
    src, tgt, SRC, TGT = data["test_src"], data["test_tgt"], data["SRC"], data["TGT"]
    months = data["MONTHS"]
    for row, target in zip(src[:50], tgt[:50]):
        words = [SRC[i] for i in row.tolist() if i != data["PAD"]]
        iso = "".join(TGT[i] for i in target.tolist() if i > data["EOS"])
        month = next(m for m in months if m in words)
        assert int(iso[5:7]) == months.index(month) + 1, (words, iso)


# ------------------------------------------------------------------ chapter 01: the gradient norms by distance
CH01 = SOURCES / "ch01_why_not_rnns" / "ch01_why_not_rnns.ipynb"


def ch01_curves() -> dict[str, tuple[list[float], list[float]]]:
    """The plotted curves of the gradient-norm cell, by label: (distance T - t, mean norm)."""
    ax = run_cell(cell_code(CH01, "1d5845a6"))["ax"]
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def reach(distance: list[float], norm: list[float], share: float = 0.01) -> float:
    """The first distance at which the norm is below ``share`` of the last input's (distance 0)."""
    at = dict(zip(distance, norm))
    return min(d for d in at if at[d] < share * at[0])


def test_ch01_the_plot_shows_the_distances_the_answer_reads() -> None:
    """Question 2 asks at which distance an input keeps 1% of the last one's influence, at g = 0.5 and g = 1
    (the model answer: about 7 and about 30), and what happens at g = 3 (growth)."""
    curves = ch01_curves()
    assert {"g = 0.5", "g = 1.0", "g = 3.0"} <= set(curves), set(curves)
    short, longer = reach(*curves["g = 0.5"]), reach(*curves["g = 1.0"])
    assert 4 <= short <= 12, f"g = 0.5 reaches 1% at distance {short}"
    assert 20 <= longer <= 39, f"g = 1 reaches 1% at distance {longer}, or not within the plotted 39"
    distance, norm = curves["g = 3.0"]
    at = dict(zip(distance, norm))
    assert at[max(at)] > 100 * at[0], "at g = 3 the norms do not grow with the distance"


# ------------------------------------------------------------------ chapter 04: positions break the symmetry
CH04 = SOURCES / "ch04_positional_encoding" / "ch04_positional_encoding.ipynb"


def ch04_outputs(use_positions: bool) -> dict:
    code = with_setting(cell_code(CH04, "ch04-10"), "use_positions", str(use_positions))
    return run_cell(code, run_cell(cell_code(CH04, "ch04-08")))


def test_ch04_without_positions_the_swap_only_reorders() -> None:
    """Question 1: permuted tokens give permuted outputs, and mean pooling cannot tell the two orders apart."""
    ns = ch04_outputs(False)
    a, b, order = ns["a"], ns["b"], ns["order"]
    assert torch.allclose(b, a[order], atol=1e-6)
    assert torch.allclose(a.mean(0), b.mean(0), atol=1e-6)


def test_ch04_with_positions_the_orders_differ() -> None:
    """...and once the encoding is added, the two orders give different outputs and different means."""
    ns = ch04_outputs(True)
    a, b, order = ns["a"], ns["b"], ns["order"]
    assert not torch.allclose(b, a[order], atol=1e-3)
    assert not torch.allclose(a.mean(0), b.mean(0), atol=1e-3)


def test_ch04_the_scales_the_second_answer_compares() -> None:
    """Question 2: TokenEmbedding starts at std 1/sqrt(d_model) and its output, scaled, at about 1; the
    encoding's entries have a root mean square of about 0.7."""
    ns = run_cell(cell_code(CH04, "ch04-08"))
    d_model = 512
    torch.manual_seed(0)
    embed = ns["TokenEmbedding"](1000, d_model)
    weight_std = embed.embedding.weight.std().item()
    assert abs(weight_std * d_model ** 0.5 - 1) < 0.05, weight_std
    with torch.no_grad():
        scaled_std = embed(torch.arange(1000)[None]).std().item()
    assert abs(scaled_std - 1) < 0.05, scaled_std
    rms = ns["sinusoidal_table"](200, d_model).pow(2).mean().sqrt().item()
    assert abs(rms - 0.5 ** 0.5) < 0.01, rms


# ------------------------------------------------------------------ chapter 03: two hand-built heads, two questions
CH03 = SOURCES / "ch03_multihead_attention" / "ch03_multihead_attention.ipynb"


def ch03_weights(strength: float = 4.0) -> torch.Tensor:
    code = with_setting(cell_code(CH03, "ch03-08"), "strength", str(strength))
    return run_cell(code)["weights"]                                        # (heads, seq_q, seq_k)


def test_ch03_the_heads_answer_what_the_cell_asks() -> None:
    """The cell asks where "on" and "sat" look in each head (review finding 29: the random module it replaced
    drew weights of 0.07-0.39 with nothing to read). Words: the cat sat on the mat."""
    w = ch03_weights()
    on, sat, cat, mat = 3, 2, 1, 5
    assert w[0, on, mat] > 0.85, "head 0: the preposition does not find its place"
    torch.testing.assert_close(w[1, on], torch.full((6,), 1 / 6))           # head 1: "on" asks nothing
    torch.testing.assert_close(w[0, sat], torch.full((6,), 1 / 6))          # head 0: nor does "sat"
    assert w[1, sat, cat] > 0.4 and w[1, sat, mat] > 0.4, "head 1: the verb does not find subject and place"
    assert w[1, cat, sat] > 0.85, "head 1: the living thing does not look at its verb"
    assert w[0, cat, 0] > 0.4 and w[0, cat, 4] > 0.4, "head 0: the noun does not look at its determiners"


def test_ch03_strength_sets_the_sharpness_the_answer_names() -> None:
    """The collapsed answer: strength 1 flattens the rows towards uniform, 8 makes them nearly one-hot."""
    soft, sharp = ch03_weights(1.0), ch03_weights(8.0)
    assert soft[0, 3].max() < 0.4 and sharp[0, 3].max() > 0.99, (soft[0, 3], sharp[0, 3])


# ------------------------------------------------------------------ chapter 05: gradients per layer, Post-LN and Pre-LN
CH05 = SOURCES / "ch05_encoder" / "ch05_encoder.ipynb"


@pytest.fixture(scope="module")
def ch05_norms() -> dict[tuple[int, bool], list[float]]:
    """{(depth, norm_first): per-layer gradient norms}, from the cell's own function at the two depths the
    second question compares (the function reads ``depth`` when called, as the learner's rerun does)."""
    ns = run_cell(cell_code(CH05, "ch05-08"))
    norms = {}
    for depth in (6, 24):
        ns["depth"] = depth
        for norm_first in (False, True):
            norms[depth, norm_first] = ns["layer_gradient_norms"](norm_first)
    return norms


def test_ch05_post_ln_grows_towards_the_output_and_more_so_when_deeper(ch05_norms) -> None:
    """The model answer: Post-LN's norms grow from the first layer to the last, the gap wider at depth 24
    (measured: 0.18 -> 0.34 at depth 6, 0.16 -> 0.45 at depth 24)."""
    gap = {depth: ch05_norms[depth, False][-1] / ch05_norms[depth, False][0] for depth in (6, 24)}
    assert gap[6] > 1.3 and gap[24] > gap[6] * 1.2, gap


def test_ch05_pre_ln_does_not_grow_and_is_smaller(ch05_norms) -> None:
    """...Pre-LN's do not grow towards the output (they shrink a little) and are smaller than Post-LN's."""
    for depth in (6, 24):
        pre, post = ch05_norms[depth, True], ch05_norms[depth, False]
        assert pre[-1] <= pre[0], (depth, pre)
        assert sum(pre) < sum(post), (depth, pre, post)


# ------------------------------------------------------------------ chapter 06: the masks drawn, the future probed
CH06 = SOURCES / "ch06_decoder_and_masks" / "ch06_decoder_and_masks.ipynb"


def test_ch06_the_target_mask_drawn_is_causal_and_padded() -> None:
    """The learner predicts the last sentence's target mask ([9, 3, pad x 4]): query q may see key k when
    k <= q (causal) and k < 2 (a real token); derived by hand."""
    mask = run_cell(cell_code(CH06, "ch06-08"))["pictures"]["target_mask, sequence 2"]
    expected = torch.tensor([[k <= q and k < 2 for k in range(6)] for q in range(6)])
    assert torch.equal(mask, expected), mask


def ch06_changes() -> torch.Tensor:
    ns = run_cell(cell_code(CH06, "ch06-10"), run_cell(cell_code(CH06, "ch06-08")))
    return ns["change"] > 1e-6                                             # (changed t, output i)


def test_ch06_the_probe_shows_no_future_leak() -> None:
    """Changing target token t changes the outputs at i >= t only (position t sees itself)."""
    changed = ch06_changes()
    expected = torch.tensor([[i >= t for i in range(6)] for t in range(6)])
    assert torch.equal(changed, expected), changed


def test_ch06_the_probe_shows_the_leak_the_page_plants(monkeypatch) -> None:
    """The cell tells the learner to swap target_mask for padding_mask to see a leak: then every output
    changes, so the picture can show it."""
    import importlib
    transformer = importlib.import_module(f"{REFERENCE_PACKAGE}.transformer")
    monkeypatch.setattr(transformer, "target_mask", transformer.padding_mask)
    assert bool(ch06_changes().all()), "with a padding mask alone the probe still shows no leak"


# ------------------------------------------------------------------ chapter 08: padding and the pooled scores
CH08 = SOURCES / "ch08_capstone" / "ch08_capstone.ipynb"


def ch08_change(plain_mean: bool) -> float:
    code = with_setting(cell_code(CH08, "ch08-08"), "plain_mean", str(plain_mean))
    return float((lambda ns: (ns["alone"] - ns["in_batch"]).abs().max())(run_cell(code)))


def test_ch08_padding_moves_the_scores_only_with_a_plain_mean() -> None:
    """The first question quotes the experiment: logits stay put with the masked mean and move with the
    plain mean over 40 pad positions."""
    assert ch08_change(False) < 1e-5
    assert ch08_change(True) > 1e-2


def test_ch08_the_corpus_facts_the_answers_quote() -> None:
    """The second question's numbers: 1,723 test reviews (one standard error about 0.9 points near 85%),
    13,870 labels, 1.8 million characters of news against 1.0 million of train reviews."""
    from course_lib.provided.capstone.data import pretraining_text, reviews
    corpus, text = reviews(), pretraining_text()
    assert (len(corpus.train), len(corpus.test)) == (13_870, 1_723)
    assert round(100 * (0.85 * 0.15 / len(corpus.test)) ** 0.5, 1) == 0.9
    news, train = sum(map(len, text.news)), sum(map(len, text.reviews))
    assert (round(news / 1e6, 1), round(train / 1e6, 1)) == (1.8, 1.0), (news, train)
