#!/usr/bin/env python
"""Build into .whl/ every wheel the GPU run (bench/device/run.py) needs that the GPU
machine's image lacks; check the total stays under the budget; print the command to run.

    .venv/bin/python bench/device/build_wheels.py [--budget-mib 60]      (make device-wheels)

The image is taken to hold only Python 3.12, numpy, sympy, networkx, mpmath and
cupy-cuda13x (nothing can be downloaded there). What else is needed is what pip would
install into a venv holding just those (`pip install --dry-run --report`), for this
project's wheel, dace 2.0.0a10 (built from its sdist) and icon4py 0.4.1 (without its
dependencies, as the Makefile installs it: it pins gt4py 1.2.1 but runs with 1.2.3).
This machine is x86-64 Linux with Python 3.12, like the GPU machines, so the wheels
pip picks here are the ones that install there.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile


ROOT = pathlib.Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".whl"
IMAGE_VENV = ROOT / ".build" / "device-image-venv"

#: What the GPU image is taken to have (besides cupy-cuda13x, which nothing here requires).
IMAGE_PACKAGES = ("numpy", "sympy", "networkx", "mpmath")
DACE = "dace==2.0.0a10"
#: installed without dependencies (see the module docstring)
NO_DEPS = ("icon4py-common==0.4.1", "icon4py-atmosphere-dycore==0.4.1")
#: icon4py's run-time dependencies that are not gt4py's (as in the Makefile)
EXTRA = ("cattrs>=26.1.0", "pyyaml>=6.0.3")


def pip(
    python: pathlib.Path | str, *args: str, capture: bool = False
) -> subprocess.CompletedProcess:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd[2:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"device-wheels: error: pip {args[0]} failed (exit {proc.returncode})")
    return proc


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_venv() -> pathlib.Path:
    """A venv holding what the GPU image holds, to resolve against (kept between runs)."""
    python = IMAGE_VENV / "bin" / "python"
    marker = IMAGE_VENV / ".ready"
    if not marker.is_file():
        shutil.rmtree(IMAGE_VENV, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(IMAGE_VENV)], check=True)
        pip(python, "install", "-q", *IMAGE_PACKAGES)
        marker.touch()
    return python


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--budget-mib", type=float, default=60.0, help="largest total size of .whl/ (default 60)"
    )
    opts = p.parse_args(argv)
    if sys.version_info[:2] != (3, 12):
        raise SystemExit("device-wheels: error: run with Python 3.12 (the GPU machines' version)")

    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir()
    # 1. built here: this project, and dace from its sdist
    pip(sys.executable, "wheel", "-q", "--no-deps", "-w", str(WHEELS), str(ROOT))
    pip(sys.executable, "wheel", "-q", "--no-deps", "--no-binary", "dace", "-w", str(WHEELS), DACE)
    pip(
        sys.executable,
        "download",
        "-q",
        "--no-deps",
        "--only-binary",
        ":all:",
        "-d",
        str(WHEELS),
        *NO_DEPS,
    )
    project = next(WHEELS.glob("gt4py_dace_xforms-*.whl"))

    # 2. what pip would add to the image for them
    python = image_venv()
    with tempfile.TemporaryDirectory() as tmp:
        report_path = pathlib.Path(tmp) / "report.json"
        pip(python, "install", "-q", "--dry-run", "--prefer-binary", "--find-links", str(WHEELS),
            "--report", str(report_path), str(project), DACE, *EXTRA)  # fmt: skip
        report = json.loads(report_path.read_text())
    have = {_norm(w.name.split("-")[0]) for w in WHEELS.iterdir()}
    needed = []
    for item in report["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if _norm(name) not in have:
            needed.append(f"{name}=={version}")

    # 3. their wheels from PyPI (built from the sdist where there is no wheel)
    try:
        pip(
            sys.executable,
            "download",
            "-q",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
            str(WHEELS),
            *needed,
        )
    except SystemExit:  # one has no wheel: one at a time, building what has none
        for req in needed:
            try:
                pip(
                    sys.executable,
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "-d",
                    str(WHEELS),
                    req,
                )
            except SystemExit:
                pip(sys.executable, "wheel", "-q", "--no-deps", "-w", str(WHEELS), req)

    files = sorted(WHEELS.glob("*.whl"), key=lambda f: -f.stat().st_size)
    if stray := [f.name for f in WHEELS.iterdir() if f.suffix != ".whl"]:
        raise SystemExit(f"device-wheels: error: not wheels: {stray}")
    total = sum(f.stat().st_size for f in files)
    print(f"\n{len(files)} wheels in {WHEELS.relative_to(ROOT)}/:")
    for f in files:
        print(f"  {f.stat().st_size / 2**20:6.2f} MiB  {f.name}")
    print(f"  {total / 2**20:6.2f} MiB  total (budget {opts.budget_mib:g} MiB)")
    if total > opts.budget_mib * 2**20:
        print(
            f"device-wheels: error: {total / 2**20:.2f} MiB is over the budget of {opts.budget_mib:g} MiB",
            file=sys.stderr,
        )
        return 1
    print("\nOn the GPU machine, in a copy of this working tree with .whl/ carried along")
    print(
        '(the device tool: carry [".whl"], timeout_s 600; the script stops starting builds at 420 s):'
    )
    print('  python3 bench/device/run.py --out "$OUT"')
    print("Here, first (fresh venv, installs from .whl/ only):  make device-dry-run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
