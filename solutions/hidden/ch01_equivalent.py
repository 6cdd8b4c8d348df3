"""Chapter 01's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
_LAST = "h_last.shape[1]: h_last is (batch, hidden_size), so axis 1 is its last axis"
EQUIVALENT = {
    "rnn.py:ReplaceUnaryOperator_USub_UAdd#1": _LAST,
    "rnn.py:ReplaceUnaryOperator_Delete_USub#1": _LAST,
}
