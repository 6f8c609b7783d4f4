"""dump_file describes every file kind in a partition directory."""

from __future__ import annotations

from tests.log.log_helpers import ManagerFactory, batch, new_log
from tierlog.log import LogConfig, dump_file


def test_dump_every_file_kind(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager(LogConfig(index_interval_bytes=1)))
    for i in range(3):
        part.append_as_leader(batch(2, ts=1_000 + i, pid=9, epoch=0, seq=2 * i), leader_epoch=1)
    part.roll()
    seg = part.segments()[0]
    log_lines = list(dump_file(seg.log_path))
    assert log_lines[0] == f"Dumping {seg.log_path}"
    batches = [line for line in log_lines if line.startswith("baseOffset:")]
    assert len(batches) == 3
    assert batches[1].startswith("baseOffset: 2 lastOffset: 3 count: 2 baseSequence: 2")
    assert "partitionLeaderEpoch: 1" in batches[1] and "CreateTime: 1001" in batches[1]
    records = [line for line in log_lines if line.startswith("| offset:")]
    assert records[0].startswith("| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 10")
    index_lines = list(dump_file(seg.offset_index_path))[1:]
    assert index_lines == [
        f"offset: 3 position: {len(batch(2))}",
        f"offset: 5 position: {2 * len(batch(2))}",
    ]
    time_lines = list(dump_file(seg.time_index_path))[1:]
    assert time_lines == ["timestamp: 1001 offset: 3", "timestamp: 1002 offset: 5"]
    snap = list(dump_file(part.dir / "00000000000000000006.snapshot"))[1:]
    assert snap[0].startswith("producerId: 9 producerEpoch: 0")
    assert "lastSequence: 5 lastOffset: 5" in snap[0]
    assert list(dump_file(part.dir / "leader-epoch-checkpoint"))[1:] == ["epoch: 1 startOffset: 0"]


def test_dump_active_index_does_not_modify_it(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager(LogConfig(index_interval_bytes=1)))
    for i in range(3):
        part.append_as_leader(batch(1, ts=1_000 + i), leader_epoch=0)
    path = part.segments()[-1].offset_index_path
    before = path.read_bytes()
    assert len(list(dump_file(path))) == 1 + 2
    assert path.read_bytes() == before
