"""Matching a concat branch copy's source dimensions to the concat node's (analysis/broadcast.py)."""

import dace

from gt4py_dace_xforms.analysis.broadcast import copy_dims, is_broadcast


N = dace.symbol("N")


def test_equal_ranks_identity_only_if_extents_are_equal():
    assert copy_dims([N, 5], [N, 5]) == (0, 1)
    assert copy_dims([N, 5], [N, 4]) is None
    assert copy_dims([N, 5], [N + 1, 5]) is None


def test_lower_rank_source_skips_extent_one_dimensions():
    assert copy_dims([N, 1], [N]) == (0, None)
    assert copy_dims([1, N], [N]) == (None, 0)
    assert is_broadcast(copy_dims([N, 1], [N]))
    assert not is_broadcast(copy_dims([N, 1], [N, 1]))


def test_lower_rank_source_needs_the_dropped_extent_to_be_one():
    assert copy_dims([N, 2], [N]) is None  # a real broadcast over 2 levels: not a plain copy
    assert copy_dims([N, N], [N]) is None  # N may be 1, but not provably
    assert copy_dims([N], [N, 1]) is None  # more source dimensions
