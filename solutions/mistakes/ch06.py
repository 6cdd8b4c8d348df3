"""Known-wrong variants of chapter 06, keyed like MISTAKES in tests/specs/ch06.py.

Each is the reference with one mistake planted. A wrong mask function is also used by the variant's
target_mask and Transformer, and a wrong DecoderLayer by its Decoder and its Transformer, so that every
case sees the mistake where a learner's code would carry it. The variants call the reference's earlier
chapters (attention, MultiHeadAttention, LayerNorm, the encoder, the embeddings).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from course_ref import decoder as ref
from course_ref import masks as ref_masks
from course_ref import transformer as ref_tf


def causal_from(shape: Callable[[Tensor], Tensor]) -> Callable:
    """A causal_mask(n, device) that gives ``shape(ones(n, n))`` instead of its lower triangle."""
    def causal_mask(n: int, device: torch.device | str | None = None) -> Tensor:
        return shape(torch.ones(n, n, dtype=torch.bool, device=device))  # (n, n)
    return causal_mask


causal_without_diagonal = causal_from(lambda ones: torch.tril(ones, diagonal=-1))
causal_upper = causal_from(torch.triu)
causal_not_tril = causal_from(lambda ones: ~torch.tril(ones))
causal_one_ahead = causal_from(lambda ones: torch.tril(ones, diagonal=1))


def padding_inverted(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens == pad_id)[:, None, None, :]


def padding_on_queries(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens != pad_id)[:, None, :, None]  # (batch, 1, seq, 1): the queries, not the keys


def target_class(padding: Callable = ref_masks.padding_mask, causal: Callable = ref_masks.causal_mask) -> Callable:
    def target_mask(tokens: Tensor, pad_id: int) -> Tensor:
        return padding(tokens, pad_id) & causal(tokens.size(1), device=tokens.device)
    return target_mask


def layer_class(self_mask: bool = True, pass_memory_mask: bool = True, q_from_memory: bool = False,
                drop_cross: bool = True, pre_drop: str = "all") -> type:
    """A DecoderLayer that drops the self-attention mask, the memory mask, or takes the cross-attention's
    queries from memory (and keys and values from the decoder); ``drop_cross`` False leaves out the
    cross-attention sublayer's dropout, and with norm_first=True ``pre_drop`` "none" every sublayer's dropout,
    "no_cross" the cross-attention's alone."""
    class WrongLayer(ref.DecoderLayer):
        def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                    memory_mask: Tensor | None = None) -> Tensor:
            tgt = tgt_mask if self_mask else None
            mem = memory_mask if pass_memory_mask else None

            def cross(h: Tensor) -> Tensor:
                if q_from_memory:  # queries from the encoder, keys and values from the decoder
                    return self.cross_attn(memory, h, h, mask=mem)
                return self.cross_attn(h, memory, memory, mask=mem)

            def drop(y: Tensor) -> Tensor:  # the cross-attention sublayer's dropout, or none
                return self.dropout(y) if drop_cross else y

            if self.norm_first:
                keep = (lambda y: y) if pre_drop == "none" else self.dropout
                cross_drop = (lambda y: y) if pre_drop in ("none", "no_cross") else drop
                h = self.norm1(x)
                x = x + keep(self.self_attn(h, h, h, mask=tgt))
                x = x + cross_drop(cross(self.norm2(x)))
                return x + keep(self.ffn(self.norm3(x)))
            x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask=tgt)))
            x = self.norm2(x + drop(cross(x)))
            return self.norm3(x + self.dropout(self.ffn(x)))
    return WrongLayer


def decoder_class(layer: type) -> type:
    class WrongDecoder(ref.Decoder):
        def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                     norm_first: bool = False) -> None:
            super().__init__(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
            self.layers = nn.ModuleList(layer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers))
    return WrongDecoder


def transformer_class(decoder: type = ref.Decoder, padding: Callable = ref_masks.padding_mask,
                      target: Callable = ref_masks.target_mask, softmax: bool = False, copy_tie: bool = False,
                      tie_src: bool = False) -> type:
    class WrongTransformer(ref_tf.Transformer):
        def __init__(self, config: ref_tf.TransformerConfig) -> None:
            super().__init__(config)
            c = config
            self.decoder = decoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
            if copy_tie and c.tie_embeddings:
                self.generator.weight = nn.Parameter(self.tgt_embed.embedding.weight.detach().clone())
            if tie_src and c.tie_embeddings:
                self.generator = nn.Linear(c.d_model, c.src_vocab)
                self.generator.weight = self.src_embed.embedding.weight

        def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
            src_mask, tgt_mask = padding(src, self.config.pad_id), target(tgt, self.config.pad_id)
            logits = self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))
            return logits.softmax(-1) if softmax else logits
    return WrongTransformer


def masks_variant(padding: Callable = ref_masks.padding_mask, causal: Callable = ref_masks.causal_mask) -> dict:
    target = target_class(padding, causal)
    return {"masks.padding_mask": padding, "masks.causal_mask": causal, "masks.target_mask": target,
            "transformer.Transformer": transformer_class(padding=padding, target=target)}


def layer_variant(**mistake: bool) -> dict:
    layer = layer_class(**mistake)
    decoder = decoder_class(layer)
    return {"decoder.DecoderLayer": layer, "decoder.Decoder": decoder,
            "transformer.Transformer": transformer_class(decoder=decoder)}


VARIANTS: dict[str, dict[str, Callable]] = {
    "causal_off_by_one": masks_variant(causal=causal_without_diagonal),
    "padding_on_queries": masks_variant(padding=padding_on_queries),
    "memory_mask_not_passed": layer_variant(pass_memory_mask=False),
    "self_attn_unmasked": layer_variant(self_mask=False),
    "cross_attn_q_from_encoder": layer_variant(q_from_memory=True),
    "softmax_logits": {"transformer.Transformer": transformer_class(softmax=True)},
    "tie_copies_weights": {"transformer.Transformer": transformer_class(copy_tie=True)},
    "causal_upper": masks_variant(causal=causal_upper),
    "causal_not_tril": masks_variant(causal=causal_not_tril),
    "causal_one_ahead": masks_variant(causal=causal_one_ahead),
    "padding_mask_inverted": masks_variant(padding=padding_inverted),
    "decoder_sublayer_dropout_missing": layer_variant(drop_cross=False),
    "decoder_pre_ln_dropout_missing": layer_variant(pre_drop="none"),
    "decoder_pre_ln_cross_dropout_missing": layer_variant(pre_drop="no_cross"),
    "generator_tied_to_src": {"transformer.Transformer": transformer_class(tie_src=True)},
}
