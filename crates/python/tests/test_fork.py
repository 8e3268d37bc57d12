"""Fork safety without torch: a child forked after the parent used the stream and a
consumer gets its own runtime (the stream reopens itself); the parent's consumer refuses
to run in the child with a clear error instead of deadlocking."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import batchweave as bw
from conftest import Target, produce_items
from payload import item_of


def child(stream: bw.Stream, parent_consumer: bw.Consumer, q: "mp.Queue[Any]", idx: int) -> None:
    try:
        try:
            parent_consumer.next(timeout=5)
            q.put("parent consumer worked in the child")
            return
        except bw.InvalidError as e:
            assert "another process" in str(e) or "process" in str(e), str(e)
        c = stream.consumer(group="child", dp=1, cp=1)
        items = [item_of(bytes(c.next(timeout=10).data[0])) for _ in range(3)]
        with stream.producer(f"child-{idx}") as p:
            p.append([b"from the child"], dp=1, cp=1, source_offset=1)
        q.put(items)
    except BaseException as e:  # report anything to the parent
        q.put(repr(e))


def test_fork_after_use(local: Target) -> None:
    stream = local.open()
    produce_items(stream, "p", [1, 2, 3, 4], dp=1, cp=1)
    c = stream.consumer(group="parent", dp=1, cp=1)
    assert item_of(bytes(c.next(timeout=10).data[0])) == 1
    ctx = mp.get_context("fork")
    q: "mp.Queue[Any]" = ctx.Queue()
    procs = [ctx.Process(target=child, args=(stream, c, q, i)) for i in range(2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [[1, 2, 3], [1, 2, 3]], results
    # The parent is unaffected.
    assert item_of(bytes(c.next(timeout=10).data[0])) == 2
    assert {"child-0", "child-1"} <= set(stream.inspect()["producers"])
    c.close()
