"""Processes killed with SIGKILL and restarted: a producer (every source item exactly
once) and a training rank (restored from its saved state_dict: exact)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import batchweave as bw
from conftest import Target
from payload import item_of

HERE = Path(__file__).resolve().parent


def spawn(script: str, *args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, str(HERE / "workers" / script), str(HERE), *args],
        stdout=subprocess.PIPE,
        text=True,
    )


def kill_after(proc: "subprocess.Popen[str]", prefix: str, count: int) -> List[str]:
    """Reads lines until `count` lines start with `prefix`, then SIGKILLs the process."""
    lines: List[str] = []
    seen = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith(prefix):
            seen += 1
            if seen >= count:
                break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, lines
    return lines


def finish(proc: "subprocess.Popen[str]") -> List[str]:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return out.splitlines()


def test_killed_producer_restarts_exactly_once(target: Target) -> None:
    opts = json.dumps(target.options)
    total = 40
    first = kill_after(spawn("produce_items.py", target.url, opts, "prep-0", str(total), "0.01"), "appended", 15)
    assert first[0] == "open 0"
    second = spawn("produce_items.py", target.url, opts, "prep-0", str(total), "0.0")
    kill_after(second, "appended", 5)
    third = finish(spawn("produce_items.py", target.url, opts, "prep-0", str(total), "0.0"))
    resumed_at = int(third[0].split()[1])
    assert 0 < resumed_at <= total and third[-1] == "done"
    stream = target.open()
    assert stream.inspect()["producers"]["prep-0"]["source_offset"] == total
    c = stream.consumer(group="check", dp=2, cp=1, rank=0, world_size=2)
    items = [item_of(bytes(c.next(timeout=10).data[0])) for _ in range(total)]
    assert items == list(range(1, total + 1)), "every source item exactly once, in order"
    assert stream.inspect()["end_step"] == total
    c.close()


def test_killed_rank_restores_exactly(target: Target, tmp_path: Path) -> None:
    stream = target.open()
    total = 30
    with stream.producer("prep-0") as p:
        from payload import item_slices

        for i in range(1, total + 1):
            p.append(item_slices(i, 2, 1, 64), dp=2, cp=1, source_offset=i)
    opts = json.dumps(target.options)
    state, log = str(tmp_path / "state.json"), str(tmp_path / "log.jsonl")
    args = (target.url, opts, state, log, str(total), "4")
    kill_after(spawn("consume_rank.py", *args, "0.02"), "step", 10)
    first = json.loads(Path(state).read_text())["cursor"]["next_step"]
    assert first >= 8 and first % 4 == 0
    out = kill_after(spawn("consume_rank.py", *args, "0.02"), "step", 7)
    assert out[0] == f"start {first}", "restored exactly at the saved step"
    second = json.loads(Path(state).read_text())["cursor"]["next_step"]
    assert second > first
    out = finish(spawn("consume_rank.py", *args, "0.0"))
    assert out[0] == f"start {second}" and out[-1] == "done"
    recs = [json.loads(line) for line in Path(log).read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(total))
    assert [r["item"] for r in recs] == list(range(1, total + 1))
    # The last checkpoint moved the rank's watermark.
    marks = stream.inspect()["groups"]
    pos = {p["position"]: p for g in marks if g["group"] == "train" for p in g["positions"]}
    assert pos["d1-c0"]["present"] and pos["d1-c0"]["step"] == 28
