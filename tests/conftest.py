"""Shared fixtures: real broker subprocesses (see ``helpers/broker.py`` for the details).

* ``broker``: a fresh broker per test with the test defaults.
* ``broker_factory(overrides=..., **kw)``: make brokers with custom settings; all are killed
  at the end of the test.
* ``module_broker``: one broker shared by a test module (for read-mostly client matrices).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.broker import HYPOTHESIS_DIR, BrokerProcess

# inherited by every child a test starts (CLI runs, Spark workers, ZooKeeper's clients)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(HYPOTHESIS_DIR))


#: Lines of each broker's log printed when a test that started it fails.
FAILURE_LOG_LINES = 80


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the item, so a fixture's teardown knows the test failed."""
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "_report_call", None)
    return report is not None and report.failed


@pytest.fixture
def broker_factory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., BrokerProcess]]:
    """Brokers for one test; when the test fails, the tail of each one's log goes to the
    report, because a failure seen only in CI can then be read without a rerun."""
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
    if _failed(request):
        for i, b in enumerate(made):
            tail = b.stderr.splitlines()[-FAILURE_LOG_LINES:]
            print(f"----- broker{i} log (last {len(tail)} lines) -----", file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)


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
