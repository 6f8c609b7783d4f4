"""Packing small cold slices into input partitions, and the bucket catalog options (pure)."""

from __future__ import annotations

import pytest

from tierlog.spark.options import OptionError, parse_source_options
from tierlog.spark.planning import ColdSegment, Slice, pack_slices
from tierlog.storage.objectstore.config import is_secret_key


def cold(tp: tuple[str, int], first: int, last: int, size: int) -> Slice:
    return Slice(tp, first, last + 1, ColdSegment(first, last, size, ref=None), 0)


def test_small_segments_of_a_partition_share_an_input_partition_in_order() -> None:
    a, b = ("t", 0), ("t", 1)
    slices = [
        cold(a, 0, 99, 1000),
        cold(a, 100, 199, 1000),
        cold(a, 200, 299, 1000),
        Slice(a, 300, 350),  # the hot tail, through the broker
        cold(b, 0, 99, 1000),
        cold(b, 100, 199, 5000),  # bigger than the target: alone
    ]
    groups = pack_slices(slices, target_bytes=2500, min_groups=1)
    assert [[(s.tp, s.start) for s in g] for g in groups] == [
        [(a, 0), (a, 100)],
        [(a, 200)],
        [(a, 300)],
        [(b, 0)],
        [(b, 100)],
    ]
    # every offset is in exactly one group, in the original order
    assert [s for g in groups for s in g] == slices


def test_packing_keeps_at_least_min_groups_when_data_allows() -> None:
    tp = ("t", 0)
    slices = [cold(tp, i * 10, i * 10 + 9, 100) for i in range(8)]
    assert len(pack_slices(slices, target_bytes=10**9, min_groups=1)) == 1
    assert len(pack_slices(slices, target_bytes=10**9, min_groups=4)) == 4


def test_bucket_catalog_option_needs_the_storage_url() -> None:
    base = {"subscribe": "t", "tierlog.catalog": "bucket"}
    with pytest.raises(OptionError, match=r"storage\.url"):
        parse_source_options(base, streaming=False)
    opts = parse_source_options(
        {**base, "tierlog.rsm.config.storage.url": "file:///tmp/b"}, streaming=False
    )
    assert opts.catalog == "bucket" and opts.rsm_class == "objectstore"
    with pytest.raises(OptionError, match=r"tierlog\.catalog"):
        parse_source_options({**base, "tierlog.catalog": "nope"}, streaming=False)


def test_object_store_hides_credentials_and_private_keys_only() -> None:
    assert is_secret_key("storage.aws.secret.access.key")
    assert is_secret_key("storage.option.aws_secret_access_key")
    assert is_secret_key("encryption.key.pairs.k1.private.key.file")
    assert not is_secret_key("storage.url")
    assert not is_secret_key("chunk.size")
    assert not is_secret_key("encryption.key.pairs.k1.public.key.file")
