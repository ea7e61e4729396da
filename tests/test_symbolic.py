"""The prover on the bounds gt4py writes for split concat nodes (`analysis.symbolic`)."""

import dace
import sympy

from gt4py_dace_xforms.analysis.concat import Branch, ConcatAnalysis, prove_union_covers


vs, ve, d, h = (
    dace.symbolic.symbol(n)
    for n in ("vertical_start", "vertical_end", "end_index_of_damping_layer", "h")
)
V = sympy.Max(1, vs)


def _concat(lower_hi, upper_lo, upper_hi):
    rows = (0, h - 1)
    return ConcatAnalysis(
        (
            Branch(region=(rows, (0, lower_hi)), edge=None),
            Branch(region=(rows, (upper_lo, upper_hi)), edge=None),
        )
    )


# compute_advection_in_predictor_vertical_momentum, gtir_tmp_74 (icon4py 0.4.1): a concat
# node over K split at the damping layer, read on the consumer's whole range.
LOWER_HI = -V + sympy.Max(1, vs, sympy.Min(ve, sympy.Max(2, d - 2))) - 1
UPPER_LO = -V + sympy.Max(2, vs, d - 2)
UPPER_HI = -V + sympy.Max(2, ve, vs, d - 2) - 1
READ = [(0, h - 1), (0, ve - V - 1)]
FACTS = [h - 1, ve - 1 - V]  # the consumer Map runs


def test_nested_extremes_of_a_split_concat_are_proven_to_cover_the_read():
    reason, split = prove_union_covers(_concat(LOWER_HI, UPPER_LO, UPPER_HI), READ, FACTS)
    assert reason is None and split == (1,)


def test_a_gap_of_one_level_is_not_covered():
    # The upper branch starting one level later leaves level `Max(2, vs, d - 2)` unwritten
    # whenever the read reaches it: the proof must fail, however deep it searches.
    reason, _ = prove_union_covers(_concat(LOWER_HI, UPPER_LO + 1, UPPER_HI), READ, FACTS)
    assert reason is not None and "cannot be proven to cover" in reason
