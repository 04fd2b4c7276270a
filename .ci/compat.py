"""`make compat`: the crew-shape and provider tests on several CrewAI releases.

Each release gets a throwaway venv of its own under ``.compat/crewai-<version>`` (gitignored,
reused by the next run): Countersign installed editable with its dev extra and
``crewai==<version>``, then the tests named by ``--tests`` run in it. ``newest`` stands for the
newest release pip finds inside the range pyproject.toml supports, so a new CrewAI release is
tried the first time this runs after it is published. Prints one line per release and exits 1
when any release failed (to install or in its tests); each release's pytest output is kept in
its venv folder as ``pytest.log``.

    python3 .ci/compat.py --tests "tests/runtime/test_providers.py" -k "not postgres" 1.15.19 newest
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / ".compat"
# The range pyproject.toml supports (its crewai requirement), as (lowest, below).
_RANGE = re.compile(r'"crewai>=([0-9.]+),<([0-9.]+)"')


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def supported_range() -> tuple[str, str]:
    found = _RANGE.search((ROOT / "pyproject.toml").read_text())
    if found is None:
        raise SystemExit("pyproject.toml names no crewai range (crewai>=X,<Y)")
    return found.group(1), found.group(2)


def newest(python: str) -> str:
    """The newest final CrewAI release pip can install that lies in the supported range."""
    listed = subprocess.run(
        [python, "-m", "pip", "index", "versions", "crewai"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(x for x in listed.splitlines() if x.startswith("Available versions:"))
    low, below = supported_range()
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    inside = [
        v
        for v in versions
        if re.fullmatch(r"[0-9]+(\.[0-9]+)*", v) and _key(low) <= _key(v) < _key(below)
    ]
    return max(inside, key=_key)


def prepare(version: str, python: str) -> Path:
    """The venv of ``version``, with Countersign and that CrewAI release installed."""
    venv = HOME / f"crewai-{version}"
    bin_python = venv / "bin" / "python"
    if not bin_python.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(bin_python), "-m", "pip", "install", "--quiet", "-e", ".[dev]", f"crewai=={version}"],
        cwd=ROOT,
        check=True,
    )
    return bin_python


def run_tests(bin_python: Path, tests: list[str], select: str, jobs: int) -> tuple[bool, str]:
    log = bin_python.parent.parent / "pytest.log"
    args = [str(bin_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    if select:
        args += ["-k", select]
    if jobs > 0:
        args += ["-n", str(jobs), "--dist", "worksteal"]
    # CrewAI keeps task outputs in a SQLite file of its own, under the user's data folder named
    # by CREWAI_STORAGE_DIR; its columns changed within 1.15.x (``SELECT *`` in 1.15.19 misreads
    # a file 1.15.30 wrote), so each release gets its own.
    env = dict(os.environ, CREWAI_STORAGE_DIR=f"countersign-tests-{bin_python.parent.parent.name}")
    with log.open("w") as out:
        done = subprocess.run(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    lines = [x for x in log.read_text().splitlines() if x.strip()]
    summary = lines[-1].strip("= ") if lines else "no output"
    return done.returncode == 0, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+", help="CrewAI releases, or 'newest'")
    parser.add_argument("--tests", required=True, help="test files, separated by spaces")
    parser.add_argument("-k", dest="select", default="", help="pytest -k: which tests run")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist processes (0: none)")
    parser.add_argument("--python", default=sys.executable, help="the Python that makes venvs")
    parser.add_argument("--install-only", action="store_true", help="build the venvs, run nothing")
    options = parser.parse_args()
    versions = [newest(options.python) if v == "newest" else v for v in options.versions]
    HOME.mkdir(exist_ok=True)
    results: list[tuple[str, bool, str]] = []
    for version in dict.fromkeys(versions):
        started = time.monotonic()
        print(f"crewai {version}: installing into {HOME.name}/crewai-{version}", flush=True)
        try:
            bin_python = prepare(version, options.python)
        except subprocess.CalledProcessError as exc:
            results.append((version, False, f"install failed ({exc})"))
            continue
        if options.install_only:
            results.append((version, True, "installed"))
            continue
        ok, summary = run_tests(bin_python, options.tests.split(), options.select, options.jobs)
        took = time.monotonic() - started
        results.append((version, ok, f"{summary} ({took:.0f} s)"))
        print(f"crewai {version}: {'ok' if ok else 'FAILED'}: {summary}", flush=True)
    print("\nmake compat:")
    for version, ok, summary in results:
        print(f"  crewai {version:<10} {'ok    ' if ok else 'FAILED'} {summary}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
