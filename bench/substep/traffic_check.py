"""The traffic list's memlet figures against DaCe's generated C++ (not compiled) for the
substep programs named on the command line: stock's final SDFG, static, lam-decomposed, 512
cells, 10 levels (`tools.traffic.code_check`; docs/traffic.md). Output: traffic_check.txt."""

import sys

from gt4py_dace_xforms.tools import layouts, substep, traffic


lay = layouts.layout("lam-decomposed", 512)
names = sys.argv[1:]
print(
    "memlet figures (tools.traffic.array_traffic) against DaCe's generated C++ (tools.traffic.codegen_count; "
    "generated, not compiled): stock's final SDFG, static, lam-decomposed, 512 cells, 10 levels, later substep"
)
print("elements; 'code' = distinct elements the loop nests touch, summed over nests")
for name in names:
    call = next(c for c in substep.SUBSTEP if c.name == name)
    for t, c in traffic.code_check(call, lay, n_levels=10):
        print(
            f"{name}:{t.name} shape {'x'.join(map(str, t.shape))}: allocated {c.allocated}; "
            f"written memlets {t.written_bytes // t.itemsize} / code {c.written} ({t.writers} / {c.writer_nests} writers); "
            f"read memlets {t.read_bytes // t.itemsize} / code {c.read} ({t.readers} / {c.reader_nests} readers)"
            + (f"; code notes: {'; '.join(c.notes)}" if c.notes else ""),
            flush=True,
        )
