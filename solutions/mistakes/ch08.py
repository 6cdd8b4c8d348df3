"""Known-wrong variants of chapter 08, keyed like MISTAKES in tests/specs/ch08.py.

Each is the reference with one mistake planted: a wrong masked_mean is also the pooling of that
variant's TransformerClassifier, so that every case sees the mistake where a learner's code would carry
it. The variants use the reference's chapters 04 and 05. Seed 000's whole classifier, which carries
several of these mistakes at once, is solutions/tests/test_ch08_seed000.py.
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor

from course_ref import classifier as ref


def plain_mean(x: Tensor, mask: Tensor) -> Tensor:
    """The mean over every position, padding included (what nn.AdaptiveAvgPool1d(1) computes)."""
    return x.mean(dim=1)  # (batch, d_model)


def mean_over_features(x: Tensor, mask: Tensor) -> Tensor:
    """The masked sum taken over the features instead of the positions: (batch, seq)."""
    keep = mask.unsqueeze(-1)  # (batch, seq, 1)
    return x.masked_fill(~keep, 0.0).sum(dim=-1) / mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)


def classifier_class(pool: Callable[[Tensor, Tensor], Tensor] = ref.masked_mean, pass_mask: bool = True,
                     scale: bool = True) -> type:
    class WrongClassifier(ref.TransformerClassifier):
        def encode(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
            if mask is None:
                mask = tokens != self.pad_id
            embedded = self.embed(tokens) if scale else self.embed.embedding(tokens)  # the latter unscaled
            x = self.positional(embedded)
            return self.encoder(x, mask=mask[:, None, None, :] if pass_mask else None)

        def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
            if mask is None:
                mask = tokens != self.pad_id
            return self.head(pool(self.encode(tokens, mask), mask))
    return WrongClassifier


def variant(pool: Callable[[Tensor, Tensor], Tensor] = ref.masked_mean, **model: bool) -> dict[str, Callable]:
    out: dict[str, Callable] = {"classifier.TransformerClassifier": classifier_class(pool, **model)}
    if pool is not ref.masked_mean:
        out["classifier.masked_mean"] = pool
    return out


VARIANTS: dict[str, dict[str, Callable]] = {
    "padding_in_pool": variant(pool=plain_mean),
    "no_padding_mask": variant(pass_mask=False),
    "pool_wrong_axis": variant(pool=mean_over_features),
    "no_sqrt_scale": variant(scale=False),
}
