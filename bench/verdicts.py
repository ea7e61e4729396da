#!/usr/bin/env python
"""Do two `make bench` runs agree on every verdict? (issue 10: two consecutive full runs must.)

    .venv/bin/python bench/verdicts.py first.json second.json [--mode persistent]

Reads two results files written by bench/bench.py (`--json`, default bench/results.json)
or by bench/substep.py (`make bench-substep`: call sites and substep sums per regime),
prints one line per program x memory mode (and allocator regime) x thread count with both verdicts, and exits 1
when a verdict differs or a configuration was timed in only one of the runs. `--mode M`
compares only memory mode M (e.g. a full run against a `--modes persistent` run).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator


def configs(rows: list[dict]) -> Iterator[tuple[str, str, dict]]:
    """(program, memory mode, timing) for every timed configuration of a bench run's rows;
    the mode reads `default/fresh` where the timing pinned an allocator regime (runs
    before the regimes timed with glibc's own: `default`)."""
    for r in rows:
        for mode, res in r.get("modes", {}).items():
            for t in res.get("timings", []):
                malloc = t.get("malloc", "glibc")
                yield r["program"], mode if malloc == "glibc" else f"{mode}/{malloc}", t


def substep_rows(doc: dict) -> list[dict]:
    """A `make bench-substep` results file (bench/substep.py `--json`) as rows of the
    shape `configs` reads: one per call site and per substep sum, each memory mode under
    `mode/regime`."""
    rows: dict[str, dict] = {}
    for reg in doc["regimes"]:
        for mode, res in reg["modes"].items():
            named = [(r["key"], r["verdict"]) for r in res["rows"]]
            named += [(f"substep ({k})", v["verdict"]) for k, v in res.get("substeps", {}).items()]
            for key, verdict in named:
                row = rows.setdefault(key, {"program": key, "modes": {}})
                row["modes"].setdefault(mode, {"timings": []})["timings"].append(
                    {"threads": res["threads"], "malloc": reg["regime"], "verdict": verdict}
                )
    return list(rows.values())


def agreement(
    rows_a: list[dict], rows_b: list[dict], mode: str | None = None
) -> list[tuple[str, str, Any, str | None, str | None]]:
    """(program, mode, threads, verdict in a, verdict in b) for every configuration of either
    run (of memory mode `mode` only, if given), in a's order then b's; None where a run did
    not time it."""
    keep = (lambda m: True) if mode is None else (lambda m: m.split("/")[0] == mode)
    a = {(p, m, t["threads"]): t["verdict"] for p, m, t in configs(rows_a) if keep(m)}
    b = {(p, m, t["threads"]): t["verdict"] for p, m, t in configs(rows_b) if keep(m)}
    keys = list(a) + [k for k in b if k not in a]
    return [(*k, a.get(k), b.get(k)) for k in keys]


def main(argv: list[str]) -> int:
    mode = None
    if "--mode" in argv:
        i = argv.index("--mode")
        mode = argv[i + 1] if i + 1 < len(argv) else ""
        argv = argv[:i] + argv[i + 2 :]
    if len(argv) != 2 or mode == "":
        print(__doc__, file=sys.stderr)
        return 2
    docs = [json.loads(open(path).read()) for path in argv]
    rows = [substep_rows(d) if "regimes" in d else d["rows"] for d in docs]
    lines = agreement(rows[0], rows[1], mode)
    differ = [line for line in lines if line[3] != line[4]]
    for prog, mode, threads, va, vb in lines:
        print(
            f"{'same' if va == vb else 'DIFF'}  {prog:<18} {mode:<18} {threads or '-':>3} thr  {va or '(not timed)'} / {vb or '(not timed)'}"
        )
    print(f"{len(lines) - len(differ)} of {len(lines)} configurations agree")
    return 1 if differ or not lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
