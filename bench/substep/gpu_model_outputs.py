"""The GPU cost model's builds, compiled for the CPU, against stock: outputs equal?

    .venv/bin/python bench/substep/gpu_model_outputs.py CELLS LEVELS PROGRAM[,PROGRAM...]

Each program at its later-substep call site on lam-decomposed, built static through
icon4py's path (bench/substep.py's descriptors: `stock` and `library_gpu_model`, the
library with `CostModel("gpu")`), called once on the same inputs; per program whether
every output equals stock's (bench/substep.py's `compare`: allclose, and bitwise). The
counts (`--counts`) replay these builds but compare nothing. Prints one JSON line per
program (bench/substep/gpu_model_outputs.txt keeps the runs)."""

import json
import sys

from _bench import substep_bench


if __name__ == "__main__":
    b = substep_bench()
    from gt4py_dace_xforms.measure.timing import pin_allocator
    from gt4py_dace_xforms.tools.layouts import layout

    pin_allocator("fresh")  # the regime of the counts' decisions (the GPU model ignores it)
    cells, levels = int(sys.argv[1]), int(sys.argv[2])
    lay = layout("lam-decomposed", cells)
    for program in sys.argv[3].split(","):
        sites = b.sites_for(lay, levels, ["later"], lprep_adv=False, programs=[program])
        inputs = b.site_inputs(sites, lay, levels)
        s = sites[0]
        got = b.build_site(s, ("stock", "library_gpu_model"), "default", "gpuout", inputs[s.key])
        cmp = b.compare(got["outputs"]["library_gpu_model"], got["outputs"]["stock"])
        bitwise = all(o["bitwise"] for o in cmp["outputs"].values())
        print(json.dumps({"program": program, "cells": cells, "levels": levels,
                          "equal": cmp["equal"], "bitwise": bitwise,
                          "max_rel_diff": cmp["max_rel_diff"]}), flush=True)  # fmt: skip
