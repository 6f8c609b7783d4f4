"""Fixtures of the end-to-end tiered-storage tests: one tiered broker per test module.

Each module shares one ``tierlog serve`` subprocess (startup dominates the suite's time);
every test uses its own topics, so the event log and the per-topic metrics stay separate.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tiered.e2e.e2e_helpers import TieredBroker, tiered_broker


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredBroker]:
    with tiered_broker(tmp_path_factory.mktemp("tiered")) as tb:
        yield tb
