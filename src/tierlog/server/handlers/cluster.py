"""DescribeCluster and InitProducerId (a transactional id goes to the transaction coordinator)."""

from __future__ import annotations

import logging
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.handlers import txn
from tierlog.server.handlers.authorized_operations import ResourceType, authorized_operations
from tierlog.server.state import BrokerState

log = logging.getLogger(__name__)


async def handle_describe_cluster(state: BrokerState, req: Request) -> Any:
    host, port = state.advertised
    return mk(
        response_schema(ApiKey.DESCRIBE_CLUSTER, req.header.api_version),
        throttle_time=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=state.cluster_id,
        controller_id=state.node_id,
        brokers=[{"broker_id": state.node_id, "host": host, "port": port, "rack": None}],
        cluster_authorized_operations=authorized_operations(
            ResourceType.CLUSTER, bool(req.body.include_cluster_authorized_operations)
        ),
    )


async def handle_init_producer_id(state: BrokerState, req: Request) -> Any:
    """A fresh producer id at epoch 0 for every idempotent producer.

    Kafka would bump the epoch of a known (id, epoch) pair (KIP-360); handing out a new id
    has the same effect for an idempotent producer (its old sequence state is abandoned).
    """
    cls = response_schema(ApiKey.INIT_PRODUCER_ID, req.header.api_version)
    if req.body.transactional_id is not None:
        return await txn.init_producer_id(state, req)
    if state.replication is not None:
        # cluster mode: ids from blocks claimed in ZooKeeper, unique across brokers
        try:
            pid = await state.replication.allocate_producer_id()
        except Exception:
            log.warning("no producer id block from ZooKeeper", exc_info=True)
            return mk(
                cls,
                throttle_time=0,
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                producer_id=-1,
                producer_epoch=-1,
            )
    else:
        pid = state.producer_ids.allocate()
    return mk(cls, throttle_time=0, error_code=0, producer_id=pid, producer_epoch=0)
