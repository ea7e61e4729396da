"""Generated gt4py programs (issue 5): stock dace, the library's backend (cost model and
"inline whatever is sound") and numpy agree. CI profile: a fixed set of programs;
`make fuzz` runs the same property for a time budget (tests/fuzzing/run_fuzz.py)."""

import pytest
from hypothesis import settings

from fuzzing.runner import Stats, run_property
from fuzzing.strategy import programs

pytestmark = pytest.mark.compile


def test_generated_programs_agree_with_stock_and_numpy():
    stats = Stats(log=print)
    # Two locals, not three as in `make fuzz`: compiling is the cost, and gt4py's own
    # optimisation takes minutes on some programs with a dozen concat_where.
    run_property(settings.get_profile("fuzz-ci"), stats, reduce_seconds=600, strategy=programs(max_locals=2, max_depth=2))
    print(stats.summary())
    # The property holds trivially if nothing is inlined: most programs must exercise the rewrite.
    assert stats.inlined["sound"] >= stats.programs // 2, stats.summary()
