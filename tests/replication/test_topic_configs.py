"""TopicConfigSync applies each topic's newest overrides once: a version that a newer one
overtook before it was applied is skipped, a version already applied is not applied again,
a re-created topic (new id) starts its versions again, and a set that does not validate
leaves the topic as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, cast

from tierlog.cluster.cluster_view import ClusterView, TopicConfig
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.replication.topic_configs import TopicConfigSync


class View:
    def __init__(self) -> None:
        self.configs: dict[str, TopicConfig] = {}

    def topic_config(self, name: str) -> TopicConfig | None:
        return self.configs.get(name)


class Harness:
    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, str]]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.view = View()
        self.sync = TopicConfigSync(self.apply, lambda name: name == "t", self.spawn)

    async def apply(self, name: str, config: Mapping[str, str]) -> None:
        if config.get("retention.ms") == "bad":
            raise KafkaError(ErrorCode.INVALID_CONFIG, "retention.ms: not a number")
        self.applied.append((name, dict(config)))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    def write(self, value: str, version: int, topic_id: str = "A") -> None:
        self.view.configs["t"] = TopicConfig({"retention.ms": value}, version, topic_id)
        self.sync.sync("t", cast(ClusterView, self.view))

    async def settle(self) -> list[str]:
        await asyncio.gather(*self.tasks)
        return [c["retention.ms"] for _, c in self.applied]


def test_a_version_overtaken_before_it_was_applied_is_skipped() -> None:
    async def run() -> list[str]:
        h = Harness()
        h.write("1", 0)
        h.write("2", 1)
        return await h.settle()

    assert asyncio.run(run()) == ["2"]


def test_each_version_is_applied_once_and_never_an_older_one() -> None:
    async def run() -> list[str]:
        h = Harness()
        h.write("1", 0)
        await h.settle()
        h.write("1", 0)  # the start of the broker sees the version it applied
        h.write("0", 0)  # a late read of the same version
        await h.settle()
        h.sync.created("t", TopicConfig({"retention.ms": "5"}, 5, "A"))
        h.write("4", 4)
        return await h.settle()

    assert asyncio.run(run()) == ["1"]


def test_a_re_created_topic_starts_its_versions_again() -> None:
    async def run() -> list[str]:
        h = Harness()
        h.write("1", 3, topic_id="A")
        await h.settle()
        h.write("2", 0, topic_id="B")
        return await h.settle()

    assert asyncio.run(run()) == ["1", "2"]


def test_an_invalid_set_is_not_applied_and_a_later_valid_one_is() -> None:
    async def run() -> list[str]:
        h = Harness()
        h.write("bad", 0)
        await h.settle()
        h.write("7", 1)
        return await h.settle()

    assert asyncio.run(run()) == ["7"]
