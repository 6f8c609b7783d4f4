"""Option parsing of the `tierlog` source: Spark Kafka source names and rules."""

from __future__ import annotations

import pytest

from tierlog.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetBound,
    OptionError,
    Subscribe,
    SubscribePattern,
    TimestampBound,
    parse_source_options,
    partition_map,
    partition_map_json,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = False, **opts: str) -> object:
    return parse_source_options({**BOOT, **opts}, streaming=streaming)


def test_defaults_match_spark_for_batch_and_streaming() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription == Subscribe(("a", "b"))
    assert batch.starting == OffsetBound(EARLIEST)
    assert batch.ending == OffsetBound(LATEST)
    assert (batch.include_headers, batch.fail_on_data_loss) == (False, True)
    stream = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting == OffsetBound(LATEST)


def test_option_names_are_case_insensitive() -> None:
    o = parse_source_options(
        {**BOOT, "SUBSCRIBEPATTERN": "t.*", "IncludeHeaders": "TRUE", "minPartitions": "8"},
        streaming=False,
    )
    assert o.subscription == SubscribePattern("t.*")
    assert o.subscription.matches("tx") and not o.subscription.matches("xt")
    assert o.include_headers and o.min_partitions == 8


def test_exactly_one_subscription_kind() -> None:
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({**BOOT}, streaming=False)
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, streaming=False)


def test_assign_json() -> None:
    o = parse_source_options({**BOOT, "assign": '{"b":[1,0],"a":[2]}'}, streaming=False)
    assert o.subscription == Assign((("a", 2), ("b", 0), ("b", 1)))


def test_bootstrap_required_unless_reading_a_log_dir() -> None:
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    o = parse_source_options({"subscribe": "a", "tierlog.log.dir": "/x"}, streaming=False)
    assert o.log_dir == "/x" and o.bootstrap is None


def test_json_offsets_and_batch_rules() -> None:
    o = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "startingOffsets": '{"t":{"0":5,"1":-2}}',
            "endingOffsets": '{"t":{"0":9,"1":-1}}',
        },
        streaming=False,
    )
    assert o.starting == OffsetBound(EARLIEST, {("t", 0): 5, ("t", 1): EARLIEST})
    assert o.ending == OffsetBound(LATEST, {("t", 0): 9, ("t", 1): LATEST})
    for bad in (
        {"startingOffsets": "latest"},
        {"endingOffsets": "earliest"},
        {"startingOffsets": '{"t":{"0":-1}}'},
        {"endingOffsets": '{"t":{"0":-2}}'},
    ):
        with pytest.raises(OptionError):
            parse_source_options({**BOOT, "subscribe": "t", **bad}, streaming=False)


def test_timestamps_take_precedence_as_in_spark() -> None:
    o = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "startingTimestamp": "1000",
            "startingOffsetsByTimestamp": '{"t":{"0":5}}',
            "startingOffsets": "earliest",
            "endingOffsetsByTimestamp": '{"t":{"0":2000}}',
            "startingOffsetsByTimestampStrategy": "latest",
        },
        streaming=False,
    )
    assert o.starting == TimestampBound(1000, {}, "latest")
    assert o.ending == TimestampBound(None, {("t", 0): 2000}, "latest")


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(OptionError, match="ending offset not valid"):
        parse_source_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_refused_kafka_params_and_bad_numbers() -> None:
    with pytest.raises(OptionError, match=r"auto\.offset\.reset"):
        parse_source_options(
            {**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "x"}, streaming=False
        )
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        parse_source_options(
            {**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, streaming=True
        )
    with pytest.raises(OptionError, match="failOnDataLoss"):
        parse_source_options({**BOOT, "subscribe": "t", "failOnDataLoss": "maybe"}, streaming=False)


def test_kafka_params_and_rsm_config_are_passed_through() -> None:
    o = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "kafka.client.id": "c",
            "tierlog.rsm.config.encryption.key.pem": "PEM",
        },
        streaming=False,
    )
    assert o.kafka_params == {"client.id": "c"}
    assert o.rsm_config == {"encryption.key.pem": "PEM"}


def test_partition_map_round_trips_through_json() -> None:
    offsets = {("b", 1): 7, ("a", 0): 3, ("a", 10): -1}
    assert partition_map("x", __import__("json").dumps(partition_map_json(offsets))) == offsets
    with pytest.raises(OptionError):
        partition_map("x", '{"a": 3}')
