"""The Python API on a local directory and the loopback S3 server."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import batchweave as bw
from conftest import Target, produce_items
from payload import item_of, item_slices


def test_produce_and_consume_every_rank(target: Target) -> None:
    stream = target.open()
    produce_items(stream, "prep-0", list(range(1, 7)), dp=2, cp=1)
    for rank in range(2):
        c = stream.consumer(group="train", dp=2, cp=1, rank=rank, world_size=2)
        got = [c.next(timeout=10) for _ in range(6)]
        assert [b.step for b in got] == list(range(6))
        for i, b in enumerate(got):
            assert len(b.data) == 1 and len(b.sources) == 1
            assert bytes(b.data[0]) == item_slices(i + 1, 2, 1, 64)[rank]
            assert b.sources[0]["producer_id"] == "prep-0"
            assert b.sources[0]["first_slice"] == rank
        c.close()
    info = stream.inspect()
    assert info["end_step"] == 6 and info["producers"]["prep-0"]["source_offset"] == 6


def test_producer_properties_and_stats(local: Target) -> None:
    stream = local.open()
    p = stream.producer("p", policy="fixed:2", max_lag=100)
    assert (p.id, p.epoch, p.committed_offset, p.closed) == ("p", 1, 0, False)
    r = p.append([b"a", bytearray(b"b")], dp=2, cp=1, source_offset=1)
    assert r["sequence"] == 1 and r["key"].startswith("tgb/p/")
    p.append([memoryview(b"c"), np.frombuffer(b"d", dtype=np.uint8)], dp=2, cp=1, source_offset=2)  # type: ignore[list-item]
    p.flush()
    assert p.stats["tgbs_committed"] == 2
    p.close()
    p.close()  # idempotent
    assert p.closed and p.stats["committed_offset"] == 2
    again = stream.producer("p")
    assert (again.epoch, again.committed_offset) == (2, 2)
    again.close()


def test_append_reads_buffers_in_place_and_lets_go(target: Target) -> None:
    """Every kind of bytes-like slice arrives intact; once `append` returned, the buffers
    are the caller's again (the exports are released: a bytearray can resize, numpy
    memory can be overwritten) without changing what was written."""
    import array

    ba = bytearray(b"bytearray-slice")
    u8 = np.arange(200, dtype=np.uint8)
    i32 = np.arange(50, dtype=np.int32).reshape(5, 10)  # 2-D, itemsize 4
    strided = np.arange(100, dtype=np.uint8)[::3]  # not contiguous: copied
    ro = np.arange(7, dtype=np.uint16)
    ro.flags.writeable = False
    mv = memoryview(bytearray(b"memoryview of a bytearray"))
    arr = array.array("d", [1.5, 2.5])
    slices: List[Any] = [ba, u8, i32, strided, ro, mv, arr, b"plain bytes"]
    expected = [bytes(memoryview(s).tobytes()) for s in slices]
    stream = target.open()
    with stream.producer("buf") as p:
        p.append(slices, dp=len(slices), cp=1, source_offset=1)
        ba.extend(b"-grown")  # raises BufferError if an export were still held
        ba[0:1] = b"X"
        u8[:] = 0
        i32[:] = -1
        mv[0:1] = b"X"
        mv.release()
        arr[0] = 9.0
    for rank, want in enumerate(expected):
        c = stream.consumer(group="g", dp=len(slices), cp=1, rank=rank, world_size=len(slices))
        assert bytes(c.next(timeout=10).data[0]) == want, rank
        c.close()


def test_policies_by_cli_name(local: Target) -> None:
    stream = local.open()
    for i, policy in enumerate(["coop", "dac", "naive", "fixed:3", "incr", "aimd"]):
        with stream.producer(f"p{i}", policy=policy) as p:
            p.append([b"x"], dp=1, cp=1, source_offset=1)
    with pytest.raises(bw.InvalidError, match="policy"):
        stream.producer("q", policy="random")


def test_slice_layouts_all_read_back(local: Target) -> None:
    # Unequal slices: "auto" packs them, "sealed" pads them into slots; every rank reads
    # its own bytes back whatever the layout.
    stream = local.open()
    slices = [b"a" * 100, b"b" * 10]
    for i, layout in enumerate(["auto", "packed", "sealed", "SEALED"]):
        with stream.producer(f"p{i}", slice_layout=layout) as p:
            p.append(slices, dp=2, cp=1, source_offset=1)
    for rank in range(2):
        c = stream.consumer(group="g", dp=2, cp=1, rank=rank, world_size=2)
        for _ in range(4):
            assert bytes(c.next(timeout=10).data[0]) == slices[rank]
        c.close()
    with pytest.raises(bw.InvalidError, match="auto, packed or sealed"):
        stream.producer("q", slice_layout="dense")


def test_with_block_drains_also_on_exception(local: Target) -> None:
    stream = local.open()
    with pytest.raises(RuntimeError, match="boom"):
        with stream.producer("p") as p:
            p.append([b"1"], dp=1, cp=1, source_offset=1)
            raise RuntimeError("boom")
    assert stream.inspect()["producers"]["p"]["source_offset"] == 1


def test_zero_copy_buffers(local: Target) -> None:
    stream = local.open()
    produce_items(stream, "p", [1, 2], dp=1, cp=1, length=1 << 16)
    c = stream.consumer(group="g", dp=1, cp=1)
    b = c.next(timeout=10)
    buf = b.data[0]
    assert isinstance(buf, bw.Buffer) and not isinstance(buf, (bytes, bytearray))
    a1 = np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
    a2 = np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
    m = memoryview(buf)
    # Two views of one Buffer share memory: neither is a copy.
    assert np.shares_memory(a1, a2)
    assert a1.__array_interface__["data"][0] == a2.__array_interface__["data"][0]
    assert m.readonly and m.nbytes == len(buf) == 1 << 16
    assert not a1.flags.writeable
    with pytest.raises((TypeError, BufferError, ValueError)):
        a1[0] = 1
    first = bytes(a1[:32])
    b2 = c.next(timeout=10)
    # Still valid (and unchanged) after the next batch.
    assert bytes(a1[:32]) == first and item_of(bytes(m[:32])) == 1
    assert item_of(bytes(b2.data[0])) == 2
    c.close()


def test_error_hierarchy() -> None:
    kinds = {
        bw.ConflictError: ("conflict", True),
        bw.FencedError: ("fenced", False),
        bw.UnavailableError: ("unavailable", True),
        bw.InvalidError: ("invalid", False),
        bw.DataError: ("data", False),
        bw.DataReclaimedError: ("data", False),
        bw.InternalError: ("internal", False),
    }
    for cls, (kind, retryable) in kinds.items():
        assert issubclass(cls, bw.BatchWeaveError)
        assert (cls.kind, cls.retryable) == (kind, retryable)
        e = cls("x")
        assert (e.kind, e.retryable) == (kind, retryable)
    assert issubclass(bw.DataReclaimedError, bw.DataError)


def test_bad_input_raises_clear_errors(local: Target, tmp_path: Path) -> None:
    stream = local.open()
    p = stream.producer("p")
    with pytest.raises(bw.InvalidError, match="dp\\*cp = 4"):
        p.append([b"a", b"b", b"c"], dp=2, cp=2, source_offset=1)
    with pytest.raises(TypeError, match="not one bytes-like"):
        p.append(b"ab", dp=2, cp=1, source_offset=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="slice 1"):
        p.append([b"a", 7], dp=2, cp=1, source_offset=1)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="str"):
        p.append(["a", "b"], dp=2, cp=1, source_offset=1)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        p.append([b"a", b"b"], dp="2", cp=1, source_offset=1)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        p.append([b"a", b"b"], dp=2, cp=1, source_offset=-1)
    # The failed appends left the producer usable.
    p.append([b"a", b"b"], dp=2, cp=1, source_offset=1)
    with pytest.raises(bw.InvalidError, match="grid"):
        p.append([b"a"], dp=1, cp=1, source_offset=2)
    p.close()
    with pytest.raises(bw.InvalidError, match="closed"):
        p.append([b"a", b"b"], dp=2, cp=1, source_offset=2)
    with pytest.raises(bw.InvalidError, match="closed"):
        p.flush()
    with pytest.raises(bw.InvalidError):
        stream.producer("bad/id")
    with pytest.raises(bw.InvalidError):
        stream.consumer(group="g", dp=2, cp=1, rank=0, world_size=3)
    with pytest.raises(bw.InvalidError):
        stream.consumer(group="no/slash", dp=1, cp=1)

    c = stream.consumer(group="g", dp=2, cp=1, rank=0, world_size=2)
    sd = c.state_dict()
    other = bw.Stream.open(str(tmp_path / "other"))
    with pytest.raises(bw.InvalidError, match="stream"):
        other.consumer(group="g", dp=2, cp=1, rank=0, world_size=2, state=sd)
    with pytest.raises(bw.InvalidError, match="group"):
        stream.consumer(group="h", dp=2, cp=1, rank=0, world_size=2, state=sd)
    with pytest.raises(bw.InvalidError, match="group"):
        c.checkpoint_committed({**sd, "group": "h"})
    with pytest.raises(bw.InvalidError, match="format"):
        stream.consumer(group="g", dp=2, cp=1, rank=0, world_size=2, state={"x": 1})
    with pytest.raises(TypeError):
        stream.consumer(group="g", dp=2, cp=1, rank=0, world_size=2, state={"x": object()})
    with pytest.raises(bw.InvalidError, match="timeout"):
        c.next(timeout=-1)
    c.close()
    with pytest.raises(bw.InvalidError, match="closed"):
        c.next()
    assert list(c) == []
    with pytest.raises(bw.BatchWeaveError):
        bw.Stream.open("")
    with pytest.raises(TypeError):
        bw.Stream.open(local.url, aws_endpoint=object())  # type: ignore[arg-type]


def test_rank_from_environment(local: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = local.open()
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    c = stream.consumer(group="g", dp=1, cp=1)
    assert (c.rank, c.world_size) == (0, 1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    c = stream.consumer(group="g", dp=2, cp=1)
    assert (c.rank, c.world_size) == (1, 2)
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(bw.InvalidError, match="WORLD_SIZE"):
        stream.consumer(group="g", dp=2, cp=1)
    monkeypatch.setenv("RANK", "x")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(bw.InvalidError, match="RANK"):
        stream.consumer(group="g", dp=2, cp=1)


def test_next_timeout_then_data_arrives(local: Target) -> None:
    stream = local.open()
    c = stream.consumer(group="g", dp=1, cp=1, poll_min=0.001, poll_max=0.02)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        c.next(timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 5
    with pytest.raises(TimeoutError):
        c.next(timeout=0.05)
    produce_items(stream, "p", [1], dp=1, cp=1)
    b = c.next(timeout=10)
    assert b.step == 0 and item_of(bytes(b.data[0])) == 1
    c.close()


def test_close_ends_iteration_in_another_thread(local: Target) -> None:
    stream = local.open()
    produce_items(stream, "p", [1, 2], dp=1, cp=1)
    c = stream.consumer(group="g", dp=1, cp=1)
    seen: List[int] = []

    def run() -> None:
        for b in c:
            seen.append(b.step)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # now blocked waiting for step 2
    c.close()
    t.join(timeout=10)
    assert not t.is_alive() and seen == [0, 1]


def test_state_dict_is_small_pure_json(local: Target) -> None:
    stream = local.open()
    produce_items(stream, "p", [1, 2, 3], dp=1, cp=1)
    c = stream.consumer(group="g", dp=1, cp=1)
    before = c.state_dict()
    assert before == c.state_dict()
    text = json.dumps(before)
    assert len(text) < 4096
    assert before["stream"] == stream.identity and before["group"] == "g"
    c.next(timeout=10)
    after = c.state_dict()
    assert after["cursor"]["next_step"] == 1 and before["cursor"]["next_step"] == 0
    # state_dict writes nothing: no watermark until checkpoint_committed.
    marks = stream.inspect()["groups"][0]["positions"]
    assert not any(p["present"] for p in marks)
    c.checkpoint_committed(json.loads(json.dumps(after)))
    marks = stream.inspect()["groups"][0]["positions"]
    assert [p["step"] for p in marks if p["present"]] == [1]
    c.close()


def test_resume_twice_is_exact(target: Target) -> None:
    stream = target.open()
    produce_items(stream, "p", list(range(1, 13)), dp=2, cp=1)

    def read(c: bw.Consumer, n: int) -> List[int]:
        return [item_of(bytes(c.next(timeout=10).data[0])) for _ in range(n)]

    c = stream.consumer(group="g", dp=2, cp=1, rank=1, world_size=2)
    assert read(c, 3) == [1, 2, 3]
    s1: Dict[str, Any] = json.loads(json.dumps(c.state_dict()))
    c.checkpoint_committed(s1)
    assert read(c, 2) == [4, 5]  # read past the checkpoint, then "crash"
    c.close()
    c = stream.consumer(group="g", dp=2, cp=1, rank=1, world_size=2, state=s1)
    assert read(c, 4) == [4, 5, 6, 7]
    s2 = c.state_dict()
    c.checkpoint_committed(s2)
    assert read(c, 1) == [8]
    c.close()
    c = stream.consumer(group="g", dp=2, cp=1, rank=1, world_size=2, state=s2)
    assert read(c, 5) == [8, 9, 10, 11, 12]
    c.close()


def test_gc_reclaims_and_reports_reclaimed(local: Target) -> None:
    stream = local.open()
    produce_items(stream, "p", list(range(1, 9)), dp=1, cp=1)
    c = stream.consumer(group="g", dp=1, cp=1)
    old = c.state_dict()
    for _ in range(6):
        c.next(timeout=10)
    c.checkpoint_committed(c.state_dict())
    dry = stream.gc(dry_run=True)
    assert dry["dry_run"] and dry["tgbs_deleted"] == 6
    report = stream.gc()
    assert report["tgbs_deleted"] == 6 and report["boundary"]["low_water_step"] == 6
    with pytest.raises(bw.DataReclaimedError) as e:
        stream.consumer(group="g", dp=1, cp=1, state=old).next(timeout=10)
    assert e.value.kind == "data" and isinstance(e.value, bw.DataError)
    c.close()
