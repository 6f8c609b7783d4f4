"""A tiered ``tierlog serve`` that uploads to a moto S3 server, and views of both sides.

The moto server and the latency proxy come from the storage tests' helpers
(``tests/helpers/object_stores.py``, ``bench/latency_proxy.py``); this module adds the broker
settings and the checks the fault scenarios need: objects under the bucket prefix, segment
states from the broker's metrics, and an audit of the bucket against the metadata.
"""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.object_stores import (
    S3_ACCESS_KEY,
    S3_SECRET_KEY,
    ServerProcess,
    boto_client,
    latency_proxy_module,
    start_moto,
)

__all__ = [
    "S3_ACCESS_KEY",
    "S3_SECRET_KEY",
    "Bucket",
    "ServerProcess",
    "boto_client",
    "latency_proxy_module",
    "metric",
    "metric_names",
    "start_moto",
    "tiered_overrides",
    "tiered_topic_configs",
]

#: Segment size of the fault-scenario topics: small, so segments seal and upload often.
SEGMENT_BYTES = 64 * 1024


@dataclass
class Bucket:
    endpoint: str
    name: str
    prefix: str

    @classmethod
    def create(cls, endpoint: str, prefix: str = "tiered") -> Bucket:
        name = f"rel-{uuid.uuid4().hex[:16]}"
        boto_client(endpoint).create_bucket(Bucket=name)
        return cls(endpoint, name, prefix)

    def object_keys(self) -> list[str]:
        s3 = boto_client(self.endpoint)
        out: list[str] = []
        token: dict[str, Any] = {}
        while True:
            r = s3.list_objects_v2(Bucket=self.name, **token)
            out += [o["Key"] for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return out
            token = {"ContinuationToken": r["NextContinuationToken"]}

    def multipart_uploads(self) -> list[str]:
        r = boto_client(self.endpoint).list_multipart_uploads(Bucket=self.name)
        return [u["Key"] for u in r.get("Uploads", [])]

    def get(self, key: str) -> bytes:
        return bytes(
            boto_client(self.endpoint).get_object(Bucket=self.name, Key=key)["Body"].read()
        )

    def put(self, key: str, data: bytes) -> None:
        boto_client(self.endpoint).put_object(Bucket=self.name, Key=key, Body=data)

    def delete(self, key: str) -> None:
        boto_client(self.endpoint).delete_object(Bucket=self.name, Key=key)


def tiered_overrides(bucket: Bucket, endpoint: str | None = None, **rsm: str) -> dict[str, str]:
    """Broker settings for tiering to ``bucket`` (through ``endpoint`` if given, e.g. the
    latency proxy), with fast task intervals and few internal partitions."""
    props = {
        "storage.url": f"s3://{bucket.name}/{bucket.prefix}",
        "storage.s3.endpoint.url": endpoint or bucket.endpoint,
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": S3_ACCESS_KEY,
        "storage.aws.secret.access.key": S3_SECRET_KEY,
        "storage.retry.max": "1",
        "storage.retry.timeout.ms": "3000",
        "storage.request.timeout.ms": "3000",
        "storage.connect.timeout.ms": "1000",
    }
    props.update({k.replace("_", "."): v for k, v in rsm.items()})
    out = {
        "remote.log.storage.manager.class.name": "objectstore",
        "remote.log.manager.task.interval.ms": "300",
        # Kafka's defaults cap the copy back-off at its task interval (30 s each); keep the
        # same proportion to these short intervals, or a streak of injected store faults
        # parks copying for 30 s while producers fill the disk with untiered segments
        "remote.log.manager.task.retry.backoff.max.ms": "3000",
        "log.retention.check.interval.ms": "300",
        "log.segment.delete.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
    }
    out.update({f"rsm.config.{k}": v for k, v in props.items()})
    return out


def tiered_topic_configs(**extra: str) -> dict[str, str]:
    """Small segments, an index entry per batch, and a local tier of one segment's worth:
    sealed segments leave the disk as soon as they are uploaded."""
    return {
        "remote.storage.enable": "true",
        "segment.bytes": str(SEGMENT_BYTES),
        "index.interval.bytes": "1",
        "local.retention.bytes": "1",
        **extra,
    }


def metric(metrics_url: str, name: str, **labels: str | int) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    want = {k: str(v) for k, v in labels.items()}
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                total += float(s.value)
    return total


def metric_names(metrics_url: str) -> Mapping[str, float]:
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


# ---- audit: the bucket against __remote_log_metadata ---------------------------------------
@dataclass
class AuditReport:
    states: dict[str, str]
    """Latest state of every segment id (Kafka's base64 rendering) in the metadata topic."""
    objects: dict[str, list[str]]
    """Object keys per segment id found in the bucket."""
    multipart_uploads: list[str]

    @property
    def orphans(self) -> list[str]:
        """Objects of segments that are not COPY_SEGMENT_FINISHED (or unknown)."""
        return sorted(
            k
            for sid, keys in self.objects.items()
            if self.states.get(sid) != "COPY_SEGMENT_FINISHED"
            for k in keys
        )

    @property
    def dangling(self) -> list[str]:
        """Segments left mid-copy or mid-delete in the metadata."""
        return sorted(
            sid
            for sid, s in self.states.items()
            if s in ("COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED")
        )

    @property
    def missing(self) -> list[str]:
        """COPY_SEGMENT_FINISHED segments without their objects."""
        return sorted(
            sid
            for sid, s in self.states.items()
            if s == "COPY_SEGMENT_FINISHED" and len(self.objects.get(sid, [])) < 2
        )

    @property
    def clean(self) -> bool:
        """No orphan objects, dangling or missing segments. Incomplete multipart uploads
        (a kill mid-multipart) are not objects; a bucket lifecycle rule
        (AbortIncompleteMultipartUpload) removes them, so they are reported, not required."""
        return not (self.orphans or self.dangling or self.missing)


def audit(bootstrap: str, bucket: Bucket, metadata_partitions: int) -> AuditReport:
    """Read ``__remote_log_metadata`` over the wire and list the bucket: the same check as an
    operator's audit job, from outside the broker."""
    from tests.reliability.rel_helpers import wire_fetch
    from tierlog.client import WireConnection
    from tierlog.storage.objectstore.layout import kafka_uuid
    from tierlog.tiered.api import RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate
    from tierlog.tiered.metadata.serde import deserialize

    states: dict[str, str] = {}
    with WireConnection.to_bootstrap(bootstrap) as c:
        for p in range(metadata_partitions):
            offset = 0
            while True:
                err, recs = wire_fetch(c, "__remote_log_metadata", offset, partition=p)
                assert err == 0, err
                if not recs:
                    break
                for o, value in recs:
                    if o < offset or value is None:
                        continue
                    rec = deserialize(value)
                    if isinstance(rec, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
                        sid = kafka_uuid(rec.remote_log_segment_id.id)
                        states[sid] = rec.state.name
                offset = recs[-1][0] + 1
    objects: dict[str, list[str]] = {}
    for key in bucket.object_keys():
        name = key.rsplit("/", 1)[-1]
        sid = name.split(".", 1)[0].split("-", 1)[-1]
        objects.setdefault(sid, []).append(key)
    return AuditReport(states, objects, bucket.multipart_uploads())
