"""The reliability suite (issue 7): fault injection with figures.

Short variants run in ``make test``; ``TIERLOG_SOAK=1`` (``make soak``) selects the long
ones. Figures land in ``$TIERLOG_RELIABILITY_RESULTS/results-<mode>.jsonl`` (see
``rel_helpers.record``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.s3_env import ServerProcess, start_moto


@pytest.fixture(scope="session")
def moto() -> Iterator[ServerProcess]:
    """One moto S3 server for the reliability session (tests that stop it use their own)."""
    server = start_moto()
    yield server
    server.stop()
