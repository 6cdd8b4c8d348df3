"""Chapter 06's surviving mutants that compute what the reference computes (solutions/scripts/mutation_score.py).

Each id is ``module:operator#occurrence`` as the script prints it, with why no case can tell it from the
reference on an input the docstring allows. A test pins this list to what the script finds today.
"""
EQUIVALENT = {
    "masks.py:ReplaceBinaryOperator_BitAnd_Mul#0": "pad * causal: the product of two bool tensors is their logical "
                                                   "and, a bool tensor like pad & causal",
}
