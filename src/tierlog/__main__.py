"""``python -m tierlog``: same as the ``tierlog`` console script.

kio registers a Hypothesis strategy for each of its protocol types whenever Hypothesis can
be imported, which it can wherever tierlog's test dependencies are installed: that costs
0.2-0.3 s of every start (Hypothesis itself and a strategy per type), and no command of
tierlog uses a strategy. ``python -m tierlog`` is how the test suite, the benchmarks and
``tools/`` start brokers and commands, hundreds of times per test run, so here Hypothesis
is hidden from kio before anything imports it. An installation without the test extras
is unaffected: there kio finds no Hypothesis either way.
"""

import sys

if "hypothesis" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]

from tierlog.cli import main

sys.exit(main())
