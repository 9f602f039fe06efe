"""The benchmarks' own virtual environment: Petastorm 0.13.1 (and matplotlib for the chart).

Petastorm 0.13.1 needs pyarrow <= 14, numpy < 2, setuptools < 70 and pyspark, none of which
fit the project's own environment (pyarrow 26, numpy 2).  This module builds a separate
virtual environment with ``python3 -m venv`` and pip (PyPI), under ``bench/.venv/petastorm``
(ignored by git through the ``.venv/`` pattern), and reuses it while its marker file
matches the pins below.

torch comes from the same release as the project's environment (the CPU wheel where pip
finds one), installed with ``--no-deps``: torch >= 2.6 declares ``setuptools >= 77``,
which conflicts with Petastorm's ``setuptools < 70`` (torch needs setuptools only to build
C++ extensions, which the benchmark does not do); torch's other dependencies are
installed by name.

Usage::

    python3 bench/petastorm_env.py            # build (or check) it; prints the versions
    python3 bench/petastorm_env.py --rebuild  # from scratch
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
VENV_DIR = BENCH_DIR / ".venv" / "petastorm"
MARKER = VENV_DIR / "bench-env.json"
ENV_VERSION = 1

PINS = [
    "petastorm==0.13.1",
    "pyarrow==14.0.2",
    "numpy<2",
    "setuptools<70",
    "pyspark>=3.5,<3.6",
    "pandas<2.2",
    "matplotlib",
]
# torch's runtime dependencies, less setuptools (see the module docstring).
TORCH_DEPS = ["filelock", "typing_extensions", "sympy", "networkx", "jinja2", "fsspec"]
REPORTED = (
    "petastorm",
    "pyarrow",
    "numpy",
    "pandas",
    "pyspark",
    "setuptools",
    "torch",
    "matplotlib",
    "diskcache",
)


def venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def _torch_requirement() -> str:
    """The running interpreter's torch release (``2.13.0`` of ``2.13.0+cpu``), else the
    one ``scripts/setup.sh`` pins: an unpinned ``torch`` would pull a multi-GB CUDA build
    (and, without its CUDA libraries, one that does not import)."""
    try:
        import torch

        return f"torch=={torch.__version__.split('+')[0]}"
    except ImportError:
        pass
    setup = BENCH_DIR.parent / "scripts" / "setup.sh"
    found = re.search(r"torch==([0-9][0-9.]*)", setup.read_text()) if setup.is_file() else None
    if found is None:
        raise SystemExit(f"petastorm env: no torch here and no torch pin in {setup}")
    return f"torch=={found.group(1)}"


def _wanted() -> dict[str, Any]:
    return {
        "env_version": ENV_VERSION,
        "pins": PINS,
        "torch": _torch_requirement(),
        "python": sys.version.split()[0],
    }


def versions(python: Path | None = None) -> dict[str, str | None]:
    """Versions of the packages that matter, as installed in the environment."""
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {list(REPORTED)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python or venv_python()), "-c", code], capture_output=True, text=True, check=True
    )
    return dict(json.loads(proc.stdout))


def ready() -> bool:
    """True when the environment exists and matches the pins."""
    if not venv_python().exists() or not MARKER.is_file():
        return False
    try:
        meta = json.loads(MARKER.read_text())
    except (OSError, ValueError):
        return False
    return bool(meta.get("wanted") == _wanted())


def ensure(rebuild: bool = False, quiet: bool = False) -> Path:
    """Builds the environment unless a matching one is there; returns its python."""
    if not rebuild and ready():
        return venv_python()
    if rebuild or VENV_DIR.exists():
        shutil.rmtree(VENV_DIR, ignore_errors=True)
    VENV_DIR.parent.mkdir(parents=True, exist_ok=True)
    log = VENV_DIR.parent / "petastorm-pip.log"

    def step(argv: list[str]) -> None:
        if not quiet:
            print(f"petastorm env: {' '.join(argv)}", file=sys.stderr, flush=True)
        with open(log, "a") as f:
            proc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"petastorm env: {argv[0]} failed (exit {proc.returncode}); see {log}")

    log.write_text("")
    step([sys.executable, "-m", "venv", str(VENV_DIR)])
    pip = [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check"]
    step([*pip, *PINS])
    step([*pip, "--no-deps", _torch_requirement()])
    step([*pip, *TORCH_DEPS])
    # The imports the benchmark uses, so that a broken install fails here.
    step(
        [
            str(venv_python()),
            "-c",
            "import torch, numpy, pyarrow, petastorm, matplotlib; "
            "from petastorm import make_batch_reader, TransformSpec; "
            "from petastorm.pytorch import BatchedDataLoader",
        ]
    )
    MARKER.write_text(json.dumps({"wanted": _wanted(), "versions": versions()}, indent=2) + "\n")
    return venv_python()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rebuild", action="store_true", help="remove and build it again")
    args = p.parse_args(argv)
    python = ensure(rebuild=args.rebuild)
    print(f"{python}")
    print(json.dumps(versions(python), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
