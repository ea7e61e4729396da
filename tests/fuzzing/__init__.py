"""Differential fuzzing of generated gt4py programs: stock dace vs the library vs numpy.

Each build is called twice: on the drawn inputs, and on the same inputs set to NaN
wherever gt4py's domain inference says the program does not read them
(`gt4py_dace_xforms.measure.poison`), so that a value read outside (a concat branch
selected outside its region, eager or lazy) shows as NaN in an output.

Profiles: "fuzz-ci" (fixed seed, few examples, run by `make test`) and "fuzz-long"
(the batches of `make fuzz`, see `run_fuzz.py`). Hypothesis does not shrink: a failure
is reduced on the expression tree instead (`reduce.py` says why).
"""

from hypothesis import HealthCheck, Phase, settings


_COMMON = dict(
    deadline=None,  # one example compiles three programs: seconds, not milliseconds
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
settings.register_profile(
    "fuzz-ci",
    max_examples=8,  # about four minutes compiling on one core of a 2-core machine
    derandomize=True,  # the same programs on every run: reproducible, and reused when unchanged
    database=None,
    phases=[Phase.explicit, Phase.generate],
    **_COMMON,
)
settings.register_profile(
    "fuzz-long", max_examples=10, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON
)

#: The strategy's arguments for the CI draws (tests/test_fuzz_programs.py): two locals, not
#: three as in `make fuzz` (compiling is the cost).
CI_PROGRAMS = dict(max_locals=2, max_depth=2)
