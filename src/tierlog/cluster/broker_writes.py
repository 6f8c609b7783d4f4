"""What a broker (not the controller) reads and writes in ZooKeeper for replication.

The replication layer goes through these functions and never touches kazoo itself, so that
ZooKeeper stays one package's business. Every function blocks (run it off the event loop)
and reports a ZooKeeper failure as ``ZooKeeperError``; outcomes that are part of the protocol
(a conditional write that lost, a znode that exists already) are return values.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.producer_id_blocks import ProducerIdBlock, claim_block
from tierlog.cluster.znodes import TopicAssignment, TopicConfigOverrides, ZnodeFormatError

log = logging.getLogger(__name__)


class ZooKeeperError(Exception):
    """ZooKeeper could not be reached or refused the operation; the caller retries later."""


def announce_controlled_shutdown(zk: KazooClient, broker_id: int) -> None:
    """Create the ephemeral ``controlled_shutdown/<id>`` znode the controller watches (an
    existing one, from an earlier attempt of this session, is kept)."""
    try:
        zk.create(paths.controlled_shutdown(broker_id), b"", ephemeral=True, makepath=True)
    except NodeExistsError:
        pass
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


def claim_producer_ids(zk: KazooClient, broker_id: int) -> ProducerIdBlock:
    """The next block of producer ids, claimed for this broker alone."""
    try:
        return claim_block(zk, broker_id)
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


def topic_config(zk: KazooClient, topic: str) -> dict[str, str]:
    """The topic's config overrides; empty when it has none or they cannot be read."""
    try:
        data, _ = zk.get(paths.topic_config(topic))
        return dict(TopicConfigOverrides.decode(data).config)
    except (NoNodeError, ZnodeFormatError):
        return {}
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


class TopicMissingError(Exception):
    """The topic is not in ZooKeeper (``/brokers/topics/<t>`` is gone or never was)."""


def read_topic_config(zk: KazooClient, topic: str) -> tuple[dict[str, str], int]:
    """The topic's config overrides and their znode version, -1 when the topic has no
    config znode. ``TopicMissingError`` when the topic itself does not exist."""
    try:
        try:
            data, stat = zk.get(paths.topic_config(topic))
        except NoNodeError:
            if zk.exists(paths.topic(topic)) is None:
                raise TopicMissingError(topic) from None
            return {}, -1
        return dict(TopicConfigOverrides.decode(data).config), int(stat.version)
    except (KazooException, OSError, ZnodeFormatError) as e:
        raise ZooKeeperError(repr(e)) from e


def write_topic_config(
    zk: KazooClient, topic: str, config: Mapping[str, str], version: int
) -> int | None:
    """Replace the topic's overrides if the znode is still at ``version`` (-1: create it);
    the new version, or None when another write came first. As Kafka's admin client does,
    any broker writes it: there is nothing for the controller to decide."""
    data = TopicConfigOverrides(dict(config)).encode()
    try:
        if version < 0:
            zk.create(paths.topic_config(topic), data, makepath=True)
            return 0
        return int(zk.set(paths.topic_config(topic), data, version).version)
    except (BadVersionError, NodeExistsError):
        return None
    except NoNodeError:
        raise TopicMissingError(topic) from None
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


def write_partition_state(
    zk: KazooClient, topic: str, partition: int, data: bytes, version: int
) -> int | None:
    """Replace the partition's state znode if it is still at ``version``; the new version,
    or None when a newer state (or the topic's deletion) won."""
    try:
        stat = zk.set(paths.partition_state(topic, partition), data, version)
    except (BadVersionError, NoNodeError):
        return None
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e
    return int(stat.version)


def shared_cluster_id(zk: KazooClient, local: str) -> str:
    """``/cluster/id`` (``{"version":"1","id":...}``), created with ``local`` if absent."""
    try:
        try:
            zk.create(
                paths.CLUSTER_ID, json.dumps({"version": "1", "id": local}).encode(), makepath=True
            )
        except NodeExistsError:
            pass
        data, _ = zk.get(paths.CLUSTER_ID)
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e
    try:
        return str(json.loads(data)["id"])
    except (ValueError, KeyError, TypeError):
        log.error("ignoring malformed %s", paths.CLUSTER_ID)
        return local


def create_topic_znodes(
    zk: KazooClient,
    name: str,
    topic_id: str,
    assignment: Mapping[int, Sequence[int]],
    config: Mapping[str, str],
) -> bool:
    """Kafka's ZK-mode auto-creation by a broker (``AdminZkClient.createTopic``): the
    topic's config and assignment, in one multi-op; the controller writes the partitions'
    first states when its view shows the topic. False when the topic exists already."""
    record = TopicAssignment(
        partitions={p: tuple(r) for p, r in assignment.items()}, topic_id=topic_id
    )
    tx = zk.transaction()
    tx.create(paths.topic_config(name), TopicConfigOverrides(config).encode())
    tx.create(paths.topic(name), record.encode())
    tx.create(paths.topic_partitions(name))
    try:
        results = tx.commit()
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e
    failed = [r for r in results if isinstance(r, Exception)]
    if any(isinstance(r, NodeExistsError) for r in failed):
        return False
    if failed:
        raise ZooKeeperError(repr(failed[0]))
    return True
