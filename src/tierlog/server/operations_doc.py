"""Renders docs/operations.md from the config key definitions and the metric list.

The document is generated so it cannot drift: a test compares the file in the repository
with this function's output (regenerate with ``tierlog docs --output docs/operations.md``).
"""

from __future__ import annotations

from tierlog.config.broker_keys import BROKER_KEYS, RLMM_KEYS
from tierlog.config.definitions import ConfigKey, render
from tierlog.config.topic_keys import TOPIC_KEYS
from tierlog.server.metrics import METRIC_DOCS


def _cell(text: str | None) -> str:
    if text is None:
        return "null"
    if text == "":
        return '""'
    return text.replace("|", "\\|")


def _key_table(keys: list[ConfigKey], with_synonyms: bool) -> list[str]:
    head = "| key | type | default | description |"
    sep = "|---|---|---|---|"
    if with_synonyms:
        head = "| key | type | default | broker default from | description |"
        sep = "|---|---|---|---|---|"
    rows = [head, sep]
    for k in keys:
        doc = k.doc + (" *(accepted; no effect in tierlog)*" if k.no_effect else "")
        cells = [f"`{k.name}`", k.type.value, f"`{_cell(render(k.default))}`"]
        if with_synonyms:
            cells.append(", ".join(f"`{s}`" for s in k.synonyms) or "-")
        cells.append(_cell(doc))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


_CLUSTER_ADMIN = [
    "## Cluster administration (cluster mode)",
    "",
    "The controller serves ElectLeaders, AlterPartitionReassignments,",
    "ListPartitionReassignments, CreateTopics, CreatePartitions and DeleteTopics; other",
    "brokers answer `NOT_CONTROLLER` and clients retry on the controller their Metadata",
    "names. The tools below take Kafka's JSON formats and do that themselves from any",
    "bootstrap broker.",
    "",
    "Each broker keeps local logs only for the partitions it hosts a replica of: it creates",
    "a partition's log when it becomes one of its replicas and deletes it when it stops",
    "being one.",
    "",
    "* `tierlog topics alter --bootstrap-server B --topic T --partitions N`",
    "  (`kafka-topics.sh --alter --partitions`): CreatePartitions. The new partitions get",
    "  replicas as Kafka assigns them (round robin, rack-aware, continuing from partition",
    "  0's first replica) and their first leader in the same ZooKeeper write; the answer",
    "  waits until this broker sees every new partition with a leader. Refused while a",
    "  partition of the topic is being reassigned (`REASSIGNMENT_IN_PROGRESS`). Keyed",
    "  records move to other partitions once the count changes, as in Kafka.",
    "* `tierlog reassign-partitions --bootstrap-server B --reassignment-json-file F",
    "  --execute|--verify|--cancel`, with F as `kafka-reassign-partitions.sh` writes it",
    '  (`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}`;',
    "  `log_dirs` only `any`). The new replicas are added and catch up; once all of them are",
    "  in the ISR the controller moves leadership into the target if it must and removes the",
    "  others in one ZooKeeper write. A removed broker deletes its local copy (also when it",
    "  was down at the time, once it is back); the remote tier stays. `--verify` reports",
    "  each partition completed, in progress or different; `--cancel` returns to the",
    "  original replicas. While a reassignment runs, no automatic preferred-leader",
    "  rebalance happens.",
    "* `tierlog leader-election --bootstrap-server B --election-type preferred|unclean",
    "  (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)`, with F as",
    '  `{"partitions":[{"topic":"t","partition":0}]}`. Per partition: elected,',
    "  `ELECTION_NOT_NEEDED` (reported as already elected), `PREFERRED_LEADER_NOT_AVAILABLE`",
    "  (the first replica is not live and in sync) or `ELIGIBLE_LEADERS_NOT_AVAILABLE` (no",
    "  live replica); the exit status is 1 when any election failed.",
    "* `tierlog topics delete` queues the topic in `/admin/delete_topics`; the controller",
    "  removes its znodes and every broker deletes its replicas. A broker that is down at",
    "  the time deletes its replicas when it starts again.",
    "* `auto.leader.rebalance.enable`: every `leader.imbalance.check.interval.seconds` (first",
    "  check 5 s after the controller is elected, sooner if the interval is shorter), a",
    "  broker whose preferred partitions are led elsewhere in more than",
    "  `leader.imbalance.per.broker.percentage` percent of cases gets them back by preferred",
    "  elections, where the preferred replica is live and in the ISR.",
    "",
    "**Unclean leader election loses data.** With `unclean.leader.election.enable=true`",
    "(broker default, or per topic, the topic winning), a partition whose in-sync replicas",
    "are all down is given to the first live out-of-sync replica, alone in the ISR and",
    "RECOVERING, instead of staying offline until an in-sync replica returns. Records that",
    "replica never received are lost, acknowledged ones included (even with `acks=all`), and",
    "when a former leader returns it truncates its log to the new leader's, dropping what",
    "only it had; consumers may see offsets reused by different records. The",
    "`--election-type unclean` election does the same on request, whatever the setting.",
    "With it off (Kafka's default), the partition stays unavailable (LEADER_NOT_AVAILABLE)",
    "but keeps every committed record.",
    "",
    "A new leader epoch is always above every epoch in the partition's",
    "`leader-epoch-checkpoint`, including a partition directory written by Apache Kafka and",
    "placed in `log.dirs`: a leader whose checkpoint holds a higher epoch than the one it was",
    "elected with refuses produce (retriable) until its state is rewritten with the epoch",
    "just above its checkpoint's.",
    "",
]


_CONSUMER_GROUPS = [
    "## Consumer groups",
    "",
    "`tierlog consumer-groups --bootstrap-server B` is Kafka 3.7's `kafka-consumer-groups.sh`",
    "over the wire: every group request goes to the group's coordinator (FindCoordinator),",
    "`--list` asks every broker, and log offsets come from each partition's leader.",
    "",
    "* `--list [--state [S,...]]`: group ids; with `--state` a GROUP / STATE table, only the",
    "  states named (case-insensitive) when some are.",
    "* `--describe (--group G ... | --all-groups)`: per partition GROUP, TOPIC, PARTITION,",
    "  CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID. LAG is the log end",
    "  offset (read_uncommitted, so it counts records of open transactions) minus the committed",
    "  offset; `-` where there is no commit. Committed partitions no member holds are listed",
    "  with `-` as the member. `--members [--verbose]` lists members (and their partitions),",
    "  `--state` the coordinator, assignment strategy, state and member count.",
    "* `--reset-offsets (--group G | --all-groups) (--topic T[:P,...] ... | --all-topics)`",
    "  with one of `--to-earliest`, `--to-latest`, `--to-offset N`, `--shift-by N`,",
    "  `--to-datetime YYYY-MM-DDTHH:mm:SS.sss` (UTC unless a zone such as `+02:00` follows),",
    "  `--by-duration PnDTnHnMnS`, `--to-current`, or `--from-file CSV` (`topic,partition,offset`",
    "  lines, or `group,topic,partition,offset`, as `--export` prints them). Prints the plan",
    "  and changes nothing unless `--execute` is given. Offsets past the log end or before its",
    "  start are moved to it, with a warning. Refused while the group has active members",
    "  (`Assignments can only be reset if the group 'G' is inactive, ...`): stop the consumers",
    "  first, or their next commit overwrites the reset.",
    "* `--delete --group G`: DeleteGroups (refused while the group has members);",
    "  `--delete-offsets --group G --topic T[:P,...]`: OffsetDelete (refused for a topic the",
    "  group's members are subscribed to).",
    "",
    "Unlike Kafka's tool, which exits 0 after printing most errors, the exit status is 1",
    "whenever a group is missing, a reset or deletion is refused, or an option is wrong, and",
    "errors go to stderr.",
    "",
]


def render_operations_doc() -> str:
    lines = [
        "# tierlog operations",
        "",
        "<!-- Generated by `tierlog docs --output docs/operations.md`; do not edit by hand. -->",
        "",
        "## Running",
        "",
        "`tierlog serve [--config server.properties] [--override key=value ...]`. Without",
        "`--config` the broker uses embedded defaults: data in `./data`, listener",
        "`127.0.0.1:9092`, and the object-store remote tier plugin over a local directory next",
        "to the data dir (topics tier only when created with `remote.storage.enable=true`).",
        "",
        "**Deviation from Kafka:** `remote.log.storage.system.enable` defaults to `true` and",
        "`remote.log.storage.manager.class.name` to `objectstore` with",
        "`rsm.config.storage.url=file://<first log dir>-remote` (the `directory` plugin gets the",
        "same root as `rsm.config.dir`), so `make run` tiers any topic created with",
        "`remote.storage.enable=true` with no other configuration (Kafka: off, no plugin). The",
        "topic-level `remote.storage.enable` keeps Kafka's default `false`. The",
        "broker therefore creates `__remote_log_metadata` at startup",
        "(`rlmm.config.remote.log.metadata.topic.num.partitions`, default 50, fixed once created:",
        "a different value later stops the broker with a message naming the key). Set",
        "`remote.log.storage.system.enable=false` for a broker without a remote tier.",
        "",
        "Every key below may appear in the file or as an override. An unknown key or an invalid",
        "value stops the broker at startup with a message naming the key. Keys starting with",
        "the RSM prefix (`rsm.config.` by default) or the RLMM prefix (`rlmm.config.`) are",
        "passed, without the prefix, to the remote storage plugins; DescribeConfigs reports",
        "them as sensitive (no value).",
        "",
        "SIGTERM or SIGINT shut the broker down gracefully: it stops accepting connections,",
        "answers waiting fetches, finishes in-flight requests, flushes every log and writes the",
        "checkpoints and the clean-shutdown marker (`.kafka_cleanshutdown`).",
        "",
        "`--log-level` sets the level of the whole log (default `info`); `--debug LOGGER`",
        "(repeatable) logs one logger and its children at debug, to follow one mechanism:",
        "`tierlog.server.txn.coordinator.transitions` logs every transaction state transition",
        "and every refusal of the transaction coordinator, `tierlog.server.handlers.produce`",
        "every refused partition of a Produce and every one answered after more than a second.",
        "",
        "## Broker configuration",
        "",
        *_key_table(list(BROKER_KEYS.all()), with_synonyms=False),
        "",
        "### RLMM keys (give them with the `rlmm.config.` prefix)",
        "",
        *_key_table(list(RLMM_KEYS.all()), with_synonyms=False),
        "",
        "## Topic configuration",
        "",
        "A topic without an override takes the value of the first broker key in the",
        '"broker default from" column that is set (hours and minutes converted to ms).',
        "DescribeConfigs reports the source: `DYNAMIC_TOPIC_CONFIG` (topic override),",
        "`STATIC_BROKER_CONFIG` (set in server.properties / --override) or `DEFAULT_CONFIG`.",
        "`local.retention.*` must not exceed",
        "`retention.*` (and must not be -1 while the total retention is finite);",
        "`remote.storage.enable=true` needs the broker switch; turning it off needs",
        "`remote.log.delete.on.disable=true`.",
        "",
        "In a cluster the overrides live in ZooKeeper (`/config/topics/<topic>`), as in Kafka:",
        "AlterConfigs and IncrementalAlterConfigs sent to any broker write them there, and",
        "every broker applies each change, including one made while it was down (it applies",
        "it when it comes back). A value a broker cannot validate is logged there and left",
        "unapplied.",
        "",
        *_key_table(list(TOPIC_KEYS.all()), with_synonyms=True),
        "",
        "## Compacted topics",
        "",
        "`cleanup.policy=compact` (or `compact,delete`) keeps the latest record of every key,",
        "as Kafka's log cleaner does: `log.cleaner.threads` threads, off the network loop,",
        "rewrite the sealed segments of the dirtiest log once its dirty ratio exceeds",
        "`min.cleanable.dirty.ratio` (or a dirty record is older than `max.compaction.lag.ms`).",
        "The active segment and records newer than `min.compaction.lag.ms` are never touched;",
        "offsets are kept, so a cleaned log has gaps. A tombstone (null value) stays",
        "`delete.retention.ms` after the cleaning that first reached it, then goes. Each thread",
        "dedupes with its share of `log.cleaner.dedupe.buffer.size` (24 bytes per key); a",
        "dirty section with more keys is cleaned in several passes. The cleaned output goes to",
        "`.cleaned` files, renamed to `.swap` and then swapped in; a crash at any step is",
        "completed or rolled back when the partition is loaded. How far each log is cleaned",
        "is kept in `cleaner-offset-checkpoint` in its log dir. A partition whose cleaning",
        "meets corrupt data is marked uncleanable and logged; it is still served.",
        "In a cluster every replica cleans its own log, as in Kafka, and only below its",
        "high watermark (cleaning stops at the segment holding the last stable offset), so a",
        "follower never rewrites records its leader could still make it truncate; replicas",
        "agree on the latest value of every key at the same offsets.",
        "",
        "Each broker exports the dirty ratio of each of its compacted logs as",
        "`tierlog_log_cleaner_dirty_ratio{topic,partition}` (computed when scraped; Kafka has",
        "no request carrying it, only the cleaner's `max-dirty-percent` gauge and its log).",
        "`tierlog topics describe --topic T --metrics-url http://HOST:9404` reads it from each",
        "endpoint given (one per broker in a cluster: every replica cleans its own log) and",
        "shows the highest per partition as `DirtyRatio` (`dirty_ratio` with `--json`).",
        "",
        "A compacted topic cannot be tiered (`remote.storage.enable=true` is refused with",
        "Kafka's message, *Remote log storage is unsupported for the compacted topics*):",
        "a remote segment is immutable once uploaded and is read by offset ranges recorded in",
        "its metadata, while the cleaner rewrites segments, merges them and removes records,",
        "so the remote copy would keep superseded values and tombstones forever and remote",
        "reads could not rely on contiguous offsets.",
        "",
        *_CLUSTER_ADMIN,
        *_CONSUMER_GROUPS,
        "## Metrics",
        "",
        "Prometheus text format at `metrics.listener` (default `http://127.0.0.1:9404/metrics`).",
        "Per-partition gauges are computed when scraped. The same endpoint also serves the",
        "process-wide registry: the storage plugin's own metrics (`tierlog_objectstore_*`,",
        "listed in [remote-format.md §11](remote-format.md#11-metrics)) and the standard",
        "`process_*` collector (CPU seconds, resident memory, open file descriptors).",
        "",
        "| metric | type | labels | description |",
        "|---|---|---|---|",
        *[f"| `{m.name}` | {m.kind} | {m.labels or '-'} | {_cell(m.help)} |" for m in METRIC_DOCS],
        "",
    ]
    return "\n".join(lines)
