"""Chapter 02's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
EQUIVALENT = {
    "attention.py:ReplaceComparisonOperator_NotEq_IsNot#0": "mask.dtype is not torch.bool: torch dtypes are "
                                                            "singletons, so `is not` and `!=` agree",
    "attention.py:ReplaceComparisonOperator_Gt_NotEq#0": "dropout_p != 0: a probability is never negative, so it "
                                                         "is dropout_p > 0",
    "attention.py:ReplaceComparisonOperator_Gt_GtE#0": "dropout_p >= 0: dropout with p = 0 keeps every weight, unscaled",
    "attention.py:NumberReplacer#11": "dropout_p > -1: the same as >= 0 for a probability (dropout with p = 0 is "
                                      "the identity)",
    "attention.py:NumberReplacer#1": "default dropout_p -1: `if dropout_p > 0` skips dropout, as with the default 0",
}
