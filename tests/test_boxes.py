"""The box prover (`analysis.boxes`): cover, disjointness and selection of pieces split in
any number of dimensions, with literal bounds (the static build) and symbolic ones."""

import itertools

import pytest
import sympy
from dace import symbolic

from gt4py_dace_xforms.analysis import boxes


N, K, B, E = (symbolic.symbol(s) for s in ("N", "K", "b", "e"))


def _box(*intervals):
    return tuple((sympy.sympify(lo), sympy.sympify(hi)) for lo, hi in intervals)


# A decomposed rank's concat node (the target's gtir_tmp_63, 20480 cells x 77 levels):
# the halo on every level, the local cells split at level 2, one level on top.
HALO_SPLIT = [
    _box((17920, 20479), (0, 75)),
    _box((0, 17919), (0, 1)),
    _box((0, 17919), (2, 75)),
    _box((0, 20479), (76, 76)),
]


@pytest.mark.parametrize(
    "read", [_box((0, 20479), (0, 75)), _box((0, 20479), (1, 76))], ids=["k", "k+1"]
)
def test_pieces_split_in_cell_and_k_cover_the_read_and_select_in_both(read):
    cover = boxes.prove_cover(read, HALO_SPLIT)
    assert cover.proven and cover.select_dims == (0, 1)
    assert boxes.prove_disjoint(HALO_SPLIT) is None


def test_a_gap_is_reported_with_the_box_it_leaves():
    pieces = HALO_SPLIT[:1] + HALO_SPLIT[2:]
    cover = boxes.prove_cover(_box((0, 20479), (0, 76)), pieces, what="pieces")
    assert cover.reason == "pieces leave [0, 17919] x [0, 1] of [0, 20479] x [0, 76] uncovered"


def test_an_overlap_is_reported_with_the_common_box():
    pieces = [_box((0, 10), (0, 5)), _box((8, 20), (3, 9))]
    assert (
        boxes.prove_disjoint(pieces, what="pieces") == "pieces 0 and 1 overlap in [8, 10] x [3, 5]"
    )


def test_a_piece_empty_for_the_constants_is_disjoint_from_everything_and_not_needed():
    empty = _box((0, -1), (0, 9))  # a zone of no cells
    pieces = [empty, _box((0, 9), (0, 9))]
    assert boxes.prove_disjoint(pieces) is None
    assert boxes.prove_cover(_box((0, 9), (0, 9)), pieces).proven


def test_symbolic_pieces_split_in_two_dimensions_are_proven_by_guillotine_cuts():
    """Rows 0:b on every level; rows b:N split at level 1: covered for every b, N, K."""
    pieces = [_box((0, B - 1), (0, K - 1)), _box((B, N - 1), (0, 0)), _box((B, N - 1), (1, K - 1))]
    read = _box((0, N - 1), (0, K - 1))
    cover = boxes.prove_cover(read, pieces)
    assert cover.proven and cover.select_dims == (0, 1)
    assert boxes.prove_disjoint(pieces) is None


def test_symbolic_gap_is_not_proven():
    pieces = [_box((0, 0), (0, K - 1)), _box((1, N - 1), (1, K - 1))]
    cover = boxes.prove_cover(_box((0, N - 1), (0, K - 1)), pieces)
    assert not cover.proven and "cannot be proven to cover" in cover.reason


def test_a_pinwheel_that_no_guillotine_cut_separates_is_decided_exactly_for_literals():
    pinwheel = [
        _box((0, 1), (0, 0)),
        _box((2, 2), (0, 1)),
        _box((1, 2), (2, 2)),
        _box((0, 0), (1, 2)),
        _box((1, 1), (1, 1)),
    ]
    assert boxes.prove_disjoint(pinwheel) is None
    assert boxes.prove_cover(_box((0, 2), (0, 2)), pinwheel).proven


@pytest.mark.parametrize("seed", range(6))
def test_literal_cover_agrees_with_counting_the_points(seed):
    """Random pieces on a 5 x 4 x 3 grid: the prover's verdict is the points' verdict."""
    import random

    rng = random.Random(seed)
    for _ in range(40):
        pieces = []
        for _ in range(rng.randint(1, 4)):
            pieces.append(tuple(sorted((rng.randint(0, n), rng.randint(-1, n))) for n in (4, 3, 2)))
        pieces = [_box(*p) for p in pieces]
        read = _box((0, 4), (0, 3), (0, 2))
        points = set(itertools.product(range(5), range(4), range(3)))
        held = {
            pt for pt in points for p in pieces if all(lo <= x <= hi for x, (lo, hi) in zip(pt, p))
        }
        assert boxes.prove_cover(read, pieces).proven == (held == points)


def test_box_test_names_only_the_selecting_dimensions():
    box = _box((0, 17919), (2, 75))
    assert (
        boxes.box_test(box, (0, 1), ["c", "k"])
        == "(0 <= c) and (c <= 17919) and (2 <= k) and (k <= 75)"
    )
    assert boxes.box_test(box, (), ["c", "k"]) == "True"


def test_tiling_finds_the_box_the_pieces_make_up():
    whole, reason = boxes.prove_tiling(HALO_SPLIT)
    assert reason is None and whole == _box((0, 20479), (0, 76))
    _, reason = boxes.prove_tiling(HALO_SPLIT[:2], what="copies")
    assert reason == "copies leave [0, 17919] x [2, 75] of [0, 20479] x [0, 75] uncovered"
