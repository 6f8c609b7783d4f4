"""``tierlog log-dirs --describe``: Kafka 3.7's ``kafka-log-dirs.sh``. DescribeLogDirs is
answered by each broker for its own directories, so it is sent to every broker asked
(``--broker-list``, default all the cluster's), and the answers are printed as Kafka's one
line of JSON: per broker, per log dir its error and its partitions' sizes on local disk
(offsetLag and isFuture are those of KIP-113's future replicas, which tierlog never has)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tierlog.cli.common import CLIENT_ID
from tierlog.cli.coordinators import error_name
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: The exception class Kafka's admin client names for a log dir's error.
_EXCEPTIONS = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "org.apache.kafka.common.errors.UnknownServerException",
}


def _ids(text: str, what: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x})
    except ValueError:
        raise SystemExit(f"tierlog: {what} must be broker ids separated by commas") from None


def check_args(a: argparse.Namespace) -> None:
    """Kafka's required options, refused before connecting."""
    if not a.describe:
        raise SystemExit('tierlog: Missing required argument "[describe]"')
    _ids(a.broker_list, "--broker-list")


def _log_dir(result: Any, topics: set[str]) -> dict[str, Any]:
    code = int(result.error_code)
    return {
        "logDir": str(result.log_dir),
        "error": None if code == 0 else _EXCEPTIONS.get(ErrorCode(code), error_name(code)),
        "partitions": [
            {
                "partition": f"{t.name}-{p.partition_index}",
                "size": int(p.partition_size),
                "offsetLag": int(p.offset_lag),
                "isFuture": bool(p.is_future_key),
            }
            for t in sorted(result.topics, key=lambda t: str(t.name))
            if not topics or str(t.name) in topics
            for p in sorted(t.partitions, key=lambda p: int(p.partition_index))
        ],
    }


def run(c: WireConnection, a: argparse.Namespace) -> None:
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    cluster = sorted(int(b.node_id) for b in md.brokers)
    asked = _ids(a.broker_list, "--broker-list") or cluster
    missing = [b for b in asked if b not in cluster]
    if missing:
        raise SystemExit(
            "ERROR: The given brokers do not exist from --broker-list: "
            f"{','.join(map(str, missing))}. Current existent brokers: "
            f"{','.join(map(str, cluster))}"
        )
    topics = {t for t in a.topic_list.split(",") if t}
    print("Querying brokers for log directories information")
    brokers = BrokerConnections(c, md, CLIENT_ID)
    described = []
    try:
        for broker in asked:
            r = brokers.to(broker).call(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
            if int(r.error_code) != 0:
                raise SystemExit(
                    f"Error: describing the log dirs of broker {broker} failed: "
                    f"{error_name(int(r.error_code))}"
                )
            described.append(
                {
                    "broker": broker,
                    "logDirs": [
                        _log_dir(x, topics) for x in sorted(r.results, key=lambda x: x.log_dir)
                    ],
                }
            )
    except OSError as e:
        raise SystemExit(f"Error: a broker could not be reached: {e}") from None
    finally:
        brokers.close()
    print(f"Received log directory information from brokers {','.join(map(str, asked))}")
    print(
        json.dumps({"version": 1, "brokers": described}, separators=(",", ":"), ensure_ascii=False)
    )
    sys.stdout.flush()


def register(sub: Any) -> None:
    """The ``log-dirs`` command."""
    p = sub.add_parser(
        "log-dirs",
        help="describe the brokers' log directories and their partitions (kafka-log-dirs.sh)",
        description="This tool helps to query log directory usage on the specified brokers.",
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="REQUIRED: the server(s) to use for bootstrapping",
    )
    p.add_argument(
        "--describe",
        action="store_true",
        help="Describe the specified log directories on the specified brokers.",
    )
    p.add_argument(
        "--topic-list",
        default="",
        metavar="TOPICS",
        help='The list of topics to be queried in the form "topic1,topic2,topic3". All topics '
        "will be queried if no topic list is specified",
    )
    p.add_argument(
        "--broker-list",
        default="",
        metavar="BROKERS",
        help='The list of brokers to be queried in the form "0,1,2". All brokers in the '
        "cluster will be queried if no broker list is specified",
    )
    p.set_defaults(func=None, wire_fn=run, check_args=check_args)
