"""The prover on the bounds gt4py writes for split concat nodes (`analysis.symbolic`)."""

import dace
import sympy

from gt4py_dace_xforms.analysis.concat import Branch, ConcatAnalysis, prove_union_covers
from gt4py_dace_xforms.analysis.symbolic import prove_nonnegative


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


def test_a_number_with_an_unevaluated_min_is_decided_not_raised():
    """gt4py writes some bounds as `Min(3, 10)` unevaluated; a number holding one, as
    `-3 + Min(3, 10)`, made sympy raise on `bool(e >= 0)` inside the output-buffer plan, which
    failed the library's build of a program stock builds (make fuzz, strict mode)."""
    three = sympy.Min(3, 10, evaluate=False)
    assert prove_nonnegative(three - 3) is True
    assert prove_nonnegative(three - 4) is False
    assert prove_nonnegative(sympy.Min(17, three, evaluate=False) - 3) is True
    assert prove_nonnegative(sympy.Max(three, 1, evaluate=False) - 2) is True
