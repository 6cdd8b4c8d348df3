"""Chapter 07's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
_SUM = "per_token summed over another axis: the loss is per_token.sum(), the sum of every term whatever the axis"
_ARGMAX = "argmax over axis 1 of the logits (batch, V) is argmax over their last axis"
EQUIVALENT = {
    "seq2seq.py:ReplaceBinaryOperator_BitOr_Add#0": "done + (next == eos): the sum of two bool tensors is their "
                                                    "logical or",
    "seq2seq.py:ReplaceBinaryOperator_BitOr_BitXor#0": "done ^ (next == eos): a finished row's next token is pad_id, "
                                                       "never eos_id (distinct ids), so xor is or",
    "seq2seq.py:ReplaceUnaryOperator_USub_UAdd#6": _SUM,
    "seq2seq.py:ReplaceUnaryOperator_USub_Invert#6": _SUM,
    "seq2seq.py:ReplaceUnaryOperator_Delete_USub#6": _SUM,
    "seq2seq.py:NumberReplacer#26": _SUM,
    "seq2seq.py:NumberReplacer#27": _SUM,
    "seq2seq.py:ReplaceUnaryOperator_USub_UAdd#11": _ARGMAX,
    "seq2seq.py:ReplaceUnaryOperator_Delete_USub#11": _ARGMAX,
    "seq2seq.py:NumberReplacer#16": "scatter_add_ reads only as many values of its source as the index has: a source "
                                    "of 2 columns adds the same 1 - eps",
    "seq2seq.py:RemoveDecorator#0": "greedy_decode without @torch.no_grad(): its tokens come from argmax, which "
                                    "carries no graph; only the memory used differs",
}
