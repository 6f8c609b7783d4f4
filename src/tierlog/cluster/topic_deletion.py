"""Cluster-wide topic deletion driven by the controller (Kafka's ``/admin/delete_topics``
flow; spec/kafka-replication.md Z-20, Z-21).

DeleteTopics on the controller queues a topic by creating ``/admin/delete_topics/<t>``
(``request_deletion``). The controller's pass then removes, in one fenced multi-op, every
znode of the topic (partition states, the topic's assignment and config) together with the
request (``delete_topic``). Brokers learn it from their view (the topic is gone), stop their
replicas and delete their local files; a broker that is offline meanwhile does so when it
comes back and finds, at start, local partitions of a topic ZooKeeper no longer has.

That differs from Kafka, whose controller waits for every replica's StopReplica answer and
pauses the deletion while a replica is offline: tierlog has no request channel to brokers to
carry those answers, and ZooKeeper's answer is final, so the deletion completes at once and
each replica catches up on its own. A topic being reassigned is deleted too (the reassignment
goes with the topic znode). ``delete.topic.enable=false`` refuses DeleteTopics with
TOPIC_DELETION_DISABLED, and the controller drops any request znode it finds, as Kafka does.
"""

from __future__ import annotations

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

from tierlog.cluster import paths
from tierlog.cluster.fencing import FencedWriter


def request_deletion(writer: FencedWriter, topic: str) -> None:
    """Queue ``topic`` for deletion (an existing request is kept)."""
    try:
        writer.create(paths.delete_topic_request(topic), b"")
    except NodeExistsError:
        pass


def _post_order(zk: KazooClient, path: str) -> list[str]:
    """``path`` and every znode below it, children first."""
    try:
        children = zk.get_children(path)
    except NoNodeError:
        return []
    out: list[str] = []
    for child in sorted(children):
        out.extend(_post_order(zk, f"{path}/{child}"))
    out.append(path)
    return out


def delete_topic(writer: FencedWriter, topic: str) -> bool:
    """Remove the topic's znodes and its deletion request in one fenced multi-op; False when
    the tree changed between listing and deleting (the next pass tries again)."""
    doomed = _post_order(writer.zk, paths.topic(topic))
    if writer.zk.exists(paths.topic_config(topic)) is not None:
        doomed.append(paths.topic_config(topic))
    if writer.zk.exists(paths.delete_topic_request(topic)) is not None:
        doomed.append(paths.delete_topic_request(topic))

    def build(tx: TransactionRequest) -> None:
        for path in doomed:
            tx.delete(path)

    if not doomed:
        return True
    try:
        writer.commit(build)
    except (NoNodeError, NotEmptyError):
        return False
    return True


def drop_request(writer: FencedWriter, topic: str) -> None:
    """Forget a deletion request (the topic does not exist, or deletion is disabled)."""
    try:
        writer.delete(paths.delete_topic_request(topic))
    except NoNodeError:
        pass
