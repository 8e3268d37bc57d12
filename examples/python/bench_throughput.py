"""Python vs Rust throughput on one local directory (a benchmark, not a test).

For 1 MB and 10 MB slices and 8 ranks (DP=8): produce with the Python SDK and with the
Rust facade (`cargo run --release -p batchweave-python --example throughput`), then
consume every step with 8 Python ranks (threads: reads release the GIL) and with 8 Rust
ranks, and print each ratio. The Python producer runs twice, with `bytes` slices and with
writable numpy arrays (both read in place). Also counts copies on the Python read path: the
buffers handed out point into the bytes the consumer read (numpy views share that memory).

    python examples/python/bench_throughput.py [--rust target/python/release/examples/throughput]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

import batchweave as bw

RANKS = 8


def py_produce(url: str, slice_bytes: int, steps: int, kind: str = "bytes") -> float:
    """Produce `steps` batches of `bytes` slices, or of writable numpy arrays (`kind="numpy"`:
    also read in place, through the buffer protocol)."""
    stream = bw.Stream.open(url)
    data: List[Any] = [bytes([r]) * slice_bytes for r in range(RANKS)]
    if kind == "numpy":
        data = [np.full(slice_bytes, r, dtype=np.uint8) for r in range(RANKS)]
    t0 = time.perf_counter()
    with stream.producer(f"bench-py-{kind}") as p:
        for q in range(1, steps + 1):
            p.append(data, dp=RANKS, cp=1, source_offset=q)
    return time.perf_counter() - t0


def py_consume(url: str, steps: int) -> float:
    stream = bw.Stream.open(url)
    consumers = [
        stream.consumer(group="bench-py", dp=RANKS, cp=1, rank=r, world_size=RANKS)
        for r in range(RANKS)
    ]
    errors: List[BaseException] = []

    def run(c: bw.Consumer) -> None:
        try:
            for _ in range(steps):
                b = c.next(timeout=60)
                a = np.frombuffer(b.data[0], dtype=np.uint8)  # type: ignore[call-overload]
                assert a.size > 0
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in consumers]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return dt


def rust(binary: str, *args: str) -> float:
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def zero_copy_check(url: str) -> bool:
    c = bw.Stream.open(url).consumer(group="zc", dp=RANKS, cp=1, rank=0, world_size=RANKS)
    b = c.next(timeout=60)
    a1 = np.frombuffer(b.data[0], dtype=np.uint8)  # type: ignore[call-overload]
    a2 = np.frombuffer(b.data[0], dtype=np.uint8)  # type: ignore[call-overload]
    return bool(np.shares_memory(a1, a2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rust", default="target/python/release/examples/throughput")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    results: List[Dict[str, float]] = []
    for slice_mb, steps in [(1, 32), (10, 6)]:
        size = slice_mb * 1_000_000
        total = size * RANKS * steps
        best: Dict[str, float] = {}
        for rep in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                py_url, rs_url = str(Path(d) / "py"), str(Path(d) / "rs")
                np_url = str(Path(d) / "np")
                runs: Dict[str, float] = {}
                # Alternate which side goes first (page cache and writeback favour neither).
                order = ["py", "rust"] if rep % 2 == 0 else ["rust", "py"]
                for side in order:
                    if side == "py":
                        runs["py_produce"] = py_produce(py_url, size, steps)
                        runs["py_produce_numpy"] = py_produce(np_url, size, steps, "numpy")
                    else:
                        runs["rust_produce"] = rust(
                            args.rust, "produce", rs_url, str(size), str(steps), str(RANKS)
                        )
                for side in order:
                    if side == "py":
                        runs["py_consume"] = py_consume(py_url, steps)
                    else:
                        runs["rust_consume"] = rust(args.rust, "consume", py_url, str(steps), str(RANKS))
                zc = zero_copy_check(py_url)
            for k, v in runs.items():
                best[k] = min(best.get(k, v), v)
        mbps = {k: total / v / 1e6 for k, v in best.items()}
        row = {
            "slice_mb": float(slice_mb),
            **{f"{k}_MBps": round(v, 1) for k, v in mbps.items()},
            "consume_ratio": round(mbps["py_consume"] / mbps["rust_consume"], 3),
            "produce_ratio": round(mbps["py_produce"] / mbps["rust_produce"], 3),
            "produce_numpy_ratio": round(mbps["py_produce_numpy"] / mbps["rust_produce"], 3),
            "zero_copy": float(zc),
        }
        results.append(row)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
