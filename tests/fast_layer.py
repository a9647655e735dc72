"""Run the fast layer (``pytest -m fast``) as the issue of tests in layers asks: with no g++ on PATH, and say how
long it took, collection included.

    python3 tests/fast_layer.py            # the layer, its wall time; exit status pytest's
    python3 tests/fast_layer.py -x -v      # extra arguments go to pytest

PATH is rebuilt as one folder of links to every program on it but the C and C++ compilers, so a test of the layer
that reaches g++ (in process or in a child) fails as it would on a machine without one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPILERS = {"g++", "gcc", "c++", "cc", "cpp", "clang", "clang++"}


def path_without_compilers(folder: Path) -> str:
    """A PATH of one folder that links every program of the current PATH but the compilers (first one wins)."""
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        d = Path(entry)
        if not d.is_dir():
            continue
        for prog in d.iterdir():
            name = prog.name
            if name in COMPILERS or name.startswith(("g++-", "gcc-", "x86_64-linux-gnu-g")) or (folder / name).exists():
                continue
            if os.access(prog, os.X_OK) and not prog.is_dir():
                (folder / name).symlink_to(prog)
    return str(folder)


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="asc-fast-") as tmp:
        env = dict(os.environ, PATH=path_without_compilers(Path(tmp)))
        start = time.monotonic()
        code = subprocess.call([sys.executable, "-m", "pytest", "-m", "fast", "-q", "-p", "no:cacheprovider",
                                *sys.argv[1:]], cwd=root, env=env)
        print(f"fast layer: {time.monotonic() - start:.1f} s wall, collection included, no g++ on PATH")
    return code


if __name__ == "__main__":
    sys.exit(main())
