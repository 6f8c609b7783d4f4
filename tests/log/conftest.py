"""Fixtures for the log-engine tests: a controllable clock and a log-manager factory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.log.log_helpers import ManagerFactory, ManualClock
from tierlog.log import LogConfig, LogManager


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_manager(tmp_path: Path, clock: ManualClock) -> Iterator[ManagerFactory]:
    made: list[LogManager] = []

    def factory(config: LogConfig | None = None, **kw: bool) -> LogManager:
        mgr = LogManager([tmp_path / "data"], config or LogConfig(), clock=clock, **kw)
        mgr.load()
        made.append(mgr)
        return mgr

    yield factory
    for mgr in made:
        for part in mgr.all_logs():
            part.close(clean=False)
