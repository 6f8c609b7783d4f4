"""``make bench``: run every ``bench/bench_*.py`` in turn, each in its own process.

One process per benchmark keeps their memory, threads and brokers apart, and running them
one after another keeps them from competing for the machine's two cores. Extra arguments
are not passed on; scale benchmarks down through their environment variables (for example
``TIERLOG_BENCH_MIB=64 make bench``). The exit code is non-zero if any benchmark failed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    failed: list[str] = []
    for script in sorted(here.glob("bench_*.py")):
        print(f"=== {script.name}", flush=True)
        started = time.monotonic()
        rc = subprocess.run([sys.executable, str(script)], cwd=here.parent, check=False).returncode
        took = time.monotonic() - started
        print(f"=== {script.name}: exit {rc} after {took:.0f} s\n", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
