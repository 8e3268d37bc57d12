"""Python and Rust on one stream: a Python producer and the Rust CLI's producer write
concurrently; the Rust CLI consumer and a Python consumer each read every step and verify
every byte (both sides use the harness's synthetic payload), and agree on each step."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Dict

from conftest import Target
import payload
from payload import crc32_hex, slice_bytes

N, LEN = 12, 64


def test_python_and_rust_producers_and_consumers(target: Target, cli: str, tmp_path: Path) -> None:
    env = target.env()

    def rust_produce(pid: str) -> "subprocess.Popen[str]":
        return subprocess.Popen(
            [cli, "produce", "--store", target.url, "--producer-id", pid, "--tgbs", str(N // 2),
             "--dp", "2", "--cp", "1", "--slice-bytes", str(LEN)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def wait(p: "subprocess.Popen[str]") -> None:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert f"{N // 2}/{N // 2} TGBs committed" in out

    # The Rust producer first, alone: its bytes tell which payload scheme the CLI has.
    wait(rust_produce("rust-0"))
    stream = target.open()
    probe = stream.consumer(group="probe", dp=2, cp=1, rank=0, world_size=2).next(timeout=30)
    src = probe.sources[0]
    payload.detect(src["producer_id"], src["sequence"], src["first_slice"], bytes(probe.data[0]))
    # Then a Python producer and a second Rust producer concurrently.
    rust_1 = rust_produce("rust-1")
    with stream.producer("py-0") as p:
        for seq in range(1, N + 1):
            slices = [slice_bytes("py-0", seq, s, LEN) for s in range(2)]
            p.append(slices, dp=2, cp=1, source_offset=seq)
    wait(rust_1)

    producers = stream.inspect()["producers"]
    assert producers["py-0"]["source_offset"] == N
    assert producers["rust-0"]["source_offset"] == producers["rust-1"]["source_offset"] == N // 2

    for rank in range(2):
        log = tmp_path / f"rust-rank{rank}.jsonl"
        r = subprocess.run(
            [cli, "consume", "--store", target.url, "--rank", str(rank), "--world-size", "2",
             "--dp", "2", "--steps", str(2 * N), "--group", "rust", "--log", str(log),
             "--slice-bytes", str(LEN), "--idle-timeout-secs", "60"],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert r.returncode == 0, r.stderr
        rust: Dict[int, str] = {}
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            rust[rec["step"]] = rec["digest"]
        assert sorted(rust) == list(range(2 * N))

        c = stream.consumer(group="python", dp=2, cp=1, rank=rank, world_size=2)
        per_producer = {"py-0": 0, "rust-0": 0, "rust-1": 0}
        for step in range(2 * N):
            b = c.next(timeout=30)
            assert b.step == step
            for src, buf in zip(b.sources, b.data):
                expected = slice_bytes(src["producer_id"], src["sequence"], src["first_slice"], LEN)
                assert bytes(buf) == expected, f"step {step}: payload mismatch"
                per_producer[src["producer_id"]] += 1
            assert crc32_hex([bytes(x) for x in b.data]) == rust[step], f"step {step}"
        assert per_producer == {"py-0": N, "rust-0": N // 2, "rust-1": N // 2}
        c.close()
