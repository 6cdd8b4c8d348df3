"""Chapter 04's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
EQUIVALENT = {
    "positional.py:ReplaceComparisonOperator_NotEq_Gt#0": "d_model % 2 > 0: a remainder is never negative, so > 0 "
                                                          "is != 0",
}
