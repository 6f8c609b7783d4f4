"""Run one benchmark against two checkouts in alternation, in the same session.

A refactor's claim is "within noise of the code before it". On a shared VM the absolute
figures move with the neighbours, so the two trees are measured turn about (A B A B ...),
each with its own venv's interpreter, and the reports are printed one after another for
comparison. The baseline checkout must have run ``make install`` (``git worktree add DIR
REV && make -C DIR install``).

    .venv/bin/python bench/side_by_side.py --baseline ../base --rounds 2 \\
        bench_produce_consume.py --mib 256
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def run_one(tree: Path, script: str, args: list[str]) -> tuple[int, float]:
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run `make install` in {tree}")
    started = time.monotonic()
    rc = subprocess.run(
        [str(python), str(tree / "bench" / script), *args], cwd=tree, check=False
    ).returncode
    return rc, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("script", help="a bench/ script name, e.g. bench_produce_consume.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="passed to the script")
    opts = parser.parse_args()
    trees = {"baseline": opts.baseline.resolve(), "this tree": Path(__file__).parents[1]}
    failed = 0
    for round_no in range(1, opts.rounds + 1):
        for name, tree in trees.items():
            print(f"=== round {round_no}, {name} ({tree})", flush=True)
            rc, took = run_one(tree, opts.script, opts.args)
            print(f"=== round {round_no}, {name}: exit {rc} after {took:.0f} s\n", flush=True)
            failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
