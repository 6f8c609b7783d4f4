"""The broker's identity on disk: Kafka's ``meta.properties`` in the first log dir.

The cluster id is generated once and then kept, because clients (and DescribeCluster)
treat a changed cluster id as a different cluster.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from tierlog.config.properties import read_properties
from tierlog.server.state_files import write_atomically

META_FILE = "meta.properties"


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def load_or_create_cluster_id(log_dir: Path, node_id: int) -> str:
    path = log_dir / META_FILE
    if path.exists():
        props = read_properties(path)
        stored = props.get("node.id")
        if stored is not None and int(stored) != node_id:
            raise RuntimeError(
                f"{path} belongs to node.id={stored}, but this broker is node.id={node_id}"
            )
        cluster_id = props.get("cluster.id")
        if cluster_id:
            return cluster_id
    cluster_id = new_cluster_id()
    text = f"cluster.id={cluster_id}\nnode.id={node_id}\nversion=1\n"
    write_atomically(path, text.encode())
    return cluster_id
