"""Shared fixtures: real broker subprocesses (see ``helpers/broker.py`` for the details).

* ``broker``: a fresh broker per test with the test defaults.
* ``broker_factory(overrides=..., **kw)``: make brokers with custom settings; all are killed
  at the end of the test.
* ``module_broker``: one broker shared by a test module (for read-mostly client matrices).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.broker import HYPOTHESIS_DIR, BrokerProcess

# inherited by every child a test starts (CLI runs, Spark workers, ZooKeeper's clients)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(HYPOTHESIS_DIR))


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    made: list[BrokerProcess] = []

    def make(
        overrides: dict[str, str] | None = None, *, start: bool = True, **kw: Any
    ) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"broker{len(made)}", overrides, **kw)
        made.append(b)
        if start:
            b.start()
        return b

    yield make
    for b in made:
        b.close()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("module-broker"))
    b.start()
    yield b
    b.close()


#: Suites left out of ``make quick``: Spark's JVM start-up and the end-to-end fault suites
#: dominate the whole run's time, and the inner loop rarely needs them.
_MARK_BY_DIR = {"spark": "spark", "reliability": "slow", "crash": "slow"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).parent
    for item in items:
        parts = Path(str(item.fspath)).relative_to(tests_dir).parts
        marker = _MARK_BY_DIR.get(parts[0]) if len(parts) > 1 else None
        if marker is not None:
            item.add_marker(marker)
