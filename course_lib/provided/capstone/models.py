"""The capstone's models by name: the provided LSTM classifier, and the hook for your TransformerClassifier.

    model = build_classifier("lstm", vocab_size=len(vocab), pad_id=vocab.pad_id, size="quick")
    logits = model(tokens, mask)        # tokens (batch, seq) long; mask (batch, seq) bool, True = a real token
    hidden = model.encode(tokens, mask) # (batch, seq, model.d_model): what masked-LM pretraining trains

Every classifier here follows one protocol, so that one training loop serves them all:
``forward(tokens, mask) -> logits (batch, num_classes)``, ``encode(tokens, mask) -> (batch, seq, d_model)``
and an attribute ``d_model``. The mask is True where a token is real and False on padding (the course's
convention, True = may attend; a Transformer turns it into ``mask[:, None, None, :]``).

The LSTM is chapter 01's point measured on real data: the same data, batches, optimizer and number of
steps as the Transformer. ``--model transformer`` imports ``course_lib.classifier.TransformerClassifier``
(chapter 08, yours) only when asked; until it exists, it stops with a message saying so.
"""
from __future__ import annotations

import importlib
import math
from functools import partial
from typing import Any, Callable, Literal, Sequence

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..i18n import _

Size = Literal["quick", "full"]
Impl = Literal["learner", "reference"]
TRANSFORMER_MODULE = "course_lib.classifier"
REFERENCE_MODULE = "course_ref.classifier"  # the instructor's reference (``--impl reference``); not in a learner tree
# Sizes by model: "quick" trains in minutes on 2 CPU cores, "full" is meant for a GPU.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "lstm": {"quick": dict(d_embed=64, d_hidden=64, num_layers=1),
             "full": dict(d_embed=256, d_hidden=256, num_layers=2)},
    "transformer": {"quick": dict(d_model=128, num_heads=4, d_ff=256, num_layers=2),
                    "full": dict(d_model=256, num_heads=8, d_ff=1024, num_layers=4)},
}


class ModelUnavailable(RuntimeError):
    """The model asked for cannot be built here (e.g. chapter 08 is not implemented yet)."""


def masked_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """The mean of ``hidden`` (batch, seq, d) over the positions where ``mask`` (batch, seq) is True.

    Padding is excluded: a review of 3 characters padded to 50 is the mean of 3 vectors, not of 50.
    A row with no real token gives zeros (not NaN).
    """
    weights = mask.to(hidden.dtype).unsqueeze(-1)                 # (batch, seq, 1)
    total = (hidden * weights).sum(dim=1)                         # (batch, d)
    return total / weights.sum(dim=1).clamp(min=1.0)              # (batch, d)


class LSTMClassifier(nn.Module):
    """Embedding -> (bi)LSTM over the real tokens only -> pooling -> dropout -> linear head.

    The LSTM reads packed sequences, so padding never enters its state (a backward LSTM that read the
    padding first would start every short review from garbage). ``pooling="mean"``: the masked mean of
    the outputs; ``"last"``: the final state of each direction (forward: after the last real token;
    backward: after the first). Runs in float32 even under autocast (cuDNN LSTMs want it).
    """

    def __init__(self, vocab_size: int, num_classes: int = 2, d_embed: int = 128, d_hidden: int = 128,
                 num_layers: int = 1, bidirectional: bool = True, pooling: Literal["mean", "last"] = "mean",
                 dropout: float = 0.1, pad_id: int = 0) -> None:
        super().__init__()
        if pooling not in ("mean", "last"):
            raise ValueError(_("pooling must be 'mean' or 'last', not {pooling}").format(pooling=repr(pooling)))
        self.pooling = pooling
        self.embedding = nn.Embedding(vocab_size, d_embed, padding_idx=pad_id)
        self.lstm = nn.LSTM(d_embed, d_hidden, num_layers, batch_first=True, bidirectional=bidirectional,
                            dropout=dropout if num_layers > 1 else 0.0)
        self.d_model = d_hidden * (2 if bidirectional else 1)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(self.d_model, num_classes)

    def _run(self, tokens: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """LSTM outputs (batch, seq, d_model), zero on padding, and the top layer's final states (batch, d_model)."""
        lengths = mask.sum(dim=1).clamp(min=1).cpu()                                 # (batch,)
        with torch.autocast(tokens.device.type, enabled=False):
            embedded = self.dropout(self.embedding(tokens)).float()                  # (batch, seq, d_embed)
            packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
            outputs, (h_n, _) = self.lstm(packed)                                    # h_n (layers*dirs, batch, d_hidden)
        hidden, _ = pad_packed_sequence(outputs, batch_first=True, total_length=tokens.size(1))  # (batch, seq, d_model)
        directions = 2 if self.lstm.bidirectional else 1
        last = h_n[-directions:].transpose(0, 1).reshape(tokens.size(0), self.d_model)  # (batch, d_model)
        return hidden, last

    def encode(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """Contextual vectors (batch, seq, d_model); zeros where ``mask`` is False."""
        return self._run(tokens, mask)[0]

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """Logits (batch, num_classes) for tokens (batch, seq) long and mask (batch, seq) bool, True = real."""
        hidden, last = self._run(tokens, mask)
        pooled = masked_mean(hidden, mask) if self.pooling == "mean" else last     # (batch, d_model)
        return self.head(self.dropout(pooled))                                      # (batch, num_classes)


def _lstm(vocab_size: int, pad_id: int, size: Size, max_len: int, dropout: float, num_classes: int) -> nn.Module:
    return LSTMClassifier(vocab_size, num_classes, dropout=dropout, pad_id=pad_id, **SIZES["lstm"][size])


class BigramInput(nn.Module):
    """A token embedding with a learned vector for each (previous token, token) pair added: character bigrams.

        out[b, t] = token_embedding(tokens[b, t]) + √d_model · bigram[id(tokens[b, t-1], tokens[b, t])]

    Chinese words are mostly two characters long, and a bag of character 1-3-grams is what the TF-IDF
    baseline reads; this gives the encoder the bigrams at its input instead of having it compose them.
    ``keys`` lists the known pairs, each coded ``previous * vocab_size + token``, sorted (build them
    from training text only: ``vocab.bigram_keys``); an unknown pair gets row 0. The first position's
    previous token is ``pad_id``. The pairs are read from the model's input, so in masked-LM pretraining
    a masked character hides its bigrams too.
    """

    def __init__(self, token_embedding: nn.Module, keys: Tensor, vocab_size: int, d_model: int,
                 pad_id: int = 0) -> None:
        super().__init__()
        self.token = token_embedding
        self.register_buffer("keys", torch.as_tensor(keys, dtype=torch.long))  # (bigrams,) sorted codes
        self.bigram = nn.Embedding(len(keys) + 1, d_model)                     # row 0: an unknown pair
        nn.init.normal_(self.bigram.weight, mean=0.0, std=d_model ** -0.5)
        self.vocab_size, self.pad_id, self.scale = vocab_size, pad_id, math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens (batch, seq) long -> (batch, seq, d_model)."""
        previous = nn.functional.pad(tokens[:, :-1], (1, 0), value=self.pad_id)  # (batch, seq)
        codes = previous * self.vocab_size + tokens                              # (batch, seq)
        where = torch.searchsorted(self.keys, codes).clamp(max=len(self.keys) - 1)  # (batch, seq)
        ids = torch.where(self.keys[where] == codes, where + 1, 0)               # (batch, seq): 0 = unknown
        return self.token(tokens) + self.bigram(ids) * self.scale               # (batch, seq, d_model)


def add_bigrams(model: nn.Module, keys: Sequence[int] | Tensor, vocab_size: int, pad_id: int = 0) -> nn.Module:
    """Give ``model`` (with an ``embed`` member and ``d_model``, as chapter 08's classifier) bigram inputs."""
    if not hasattr(model, "embed"):
        raise ModelUnavailable(_("bigram inputs need the classifier's token embedding as the member `embed` "
                                 "(chapter 08's contract)"))
    model.embed = BigramInput(model.embed, torch.as_tensor(keys, dtype=torch.long), vocab_size,
                              int(model.d_model), pad_id)
    return model


def _classifier_class(impl: Impl) -> type[nn.Module]:
    """``TransformerClassifier`` of the learner's ``course_lib.classifier``, or of the reference ``course_ref``."""
    if impl == "reference":
        try:
            return importlib.import_module(REFERENCE_MODULE).TransformerClassifier
        except ModuleNotFoundError:
            raise ModelUnavailable(_("--impl reference: the reference implementation (course_ref) ships only with "
                                     "the instructor's repository; train your own with --impl learner")) from None
    try:
        module = importlib.import_module(TRANSFORMER_MODULE)
    except ModuleNotFoundError as err:
        if err.name != TRANSFORMER_MODULE:
            raise
        raise ModelUnavailable(_("--model transformer: chapter 08 not implemented yet (module missing: {module}). "
                                 "Write TransformerClassifier in course_lib/classifier.py, or train --model lstm "
                                 "meanwhile.").format(module=TRANSFORMER_MODULE)) from None
    cls = getattr(module, "TransformerClassifier", None)
    if cls is None:
        raise ModelUnavailable(_("--model transformer: chapter 08 not implemented yet: {module} has no "
                                 "TransformerClassifier.").format(module=TRANSFORMER_MODULE))
    return cls


def _transformer(vocab_size: int, pad_id: int, size: Size, max_len: int, dropout: float,
                 num_classes: int, impl: Impl = "learner") -> nn.Module:
    """``TransformerClassifier`` (chapter 08) of ``impl``, imported only now."""
    cls = _classifier_class(impl)
    try:
        model = cls(vocab_size=vocab_size, num_classes=num_classes, dropout=dropout, pad_id=pad_id,
                    max_len=max_len, **SIZES["transformer"][size])
        model.eval()
        with torch.no_grad():  # fail now, with a clear message, rather than at the first training step
            probe = torch.full((1, 2), 1 if pad_id != 1 else 0, dtype=torch.long)  # (1, 2): any non-pad id
            model(probe, torch.ones(1, 2, dtype=torch.bool))
        model.train()
    except NotImplementedError as err:
        hint = "" if impl == "reference" else _(" (or, in the instructor's repository, --impl reference)")
        raise ModelUnavailable(_("--model transformer: chapter 08 not implemented yet: {error}{hint}").format(
            error=err, hint=hint)) from None
    return model


Builder = Callable[[int, int, Size, int, float, int], nn.Module]
CLASSIFIERS: dict[str, Builder] = {"lstm": _lstm, "transformer": _transformer}


def register_classifier(name: str, builder: Builder) -> None:
    """Make ``--model name`` build ``builder(vocab_size, pad_id, size, max_len, dropout, num_classes)``."""
    CLASSIFIERS[name] = builder


def build_classifier(name: str, vocab_size: int, pad_id: int = 0, size: Size = "quick", max_len: int = 256,
                     dropout: float = 0.1, num_classes: int = 2, impl: Impl = "learner") -> nn.Module:
    """The classifier called ``name`` ("lstm", "transformer", or one registered), freshly initialised.

    ``impl`` chooses whose ``TransformerClassifier`` "transformer" builds: the learner's (``course_lib``)
    or the reference (``course_ref``, the instructor's repository only).
    """
    if name not in CLASSIFIERS:
        raise ValueError(_("unknown model {name}; choose one of {names}").format(name=repr(name),
                                                                                 names=sorted(CLASSIFIERS)))
    if size not in ("quick", "full"):
        raise ValueError(_("size must be 'quick' or 'full', not {size}").format(size=repr(size)))
    builder = partial(_transformer, impl=impl) if CLASSIFIERS[name] is _transformer else CLASSIFIERS[name]
    return builder(vocab_size, pad_id, size, max_len, dropout, num_classes)
