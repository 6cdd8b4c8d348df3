"""Chapter 03's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
_D_K = "self.d_k is never read: split_heads takes d_k from the shape of its input"
EQUIVALENT = {
    **{f"multihead.py:ReplaceBinaryOperator_FloorDiv_{op}#1": _D_K
       for op in ("Add", "Sub", "Mul", "Div", "Mod", "Pow", "RShift", "LShift", "BitOr", "BitAnd", "BitXor")},
    "multihead.py:ReplaceComparisonOperator_NotEq_Gt#0": "d_model % num_heads > 0: a remainder is never negative, "
                                                         "so > 0 is != 0",
    "multihead.py:NumberReplacer#9": "default dropout -1: the attention drops nothing when dropout_p <= 0, as with 0",
    "multihead.py:NumberReplacer#13": "dropout_p -1 in evaluation mode: the attention drops nothing when "
                                      "dropout_p <= 0, as with 0",
}
