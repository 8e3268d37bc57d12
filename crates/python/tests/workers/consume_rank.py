"""A training rank process: restores from its state file when there is one, logs every
step it consumes (step, item) to a log file (cut back to the restored step on start, as a
training job's metrics would be), and checkpoints (state file + checkpoint_committed)
every K steps. Killed at any point and restarted it must log every step exactly once."""

from __future__ import annotations

import json
import os
import sys
import time

import batchweave as bw

sys.path.insert(0, sys.argv[1])
from payload import item_of  # noqa: E402


def write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main() -> None:
    _, _tests, url, options, state_file, log_file, steps, every, delay = sys.argv
    stream = bw.Stream.open(url, **json.loads(options))
    state = None
    if os.path.exists(state_file):
        with open(state_file) as f:
            state = json.load(f)
    rank = stream.consumer(group="train", dp=2, cp=1, rank=1, world_size=2, state=state)
    start = rank.state_dict()["cursor"]["next_step"]
    kept = []
    if os.path.exists(log_file):
        with open(log_file) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    break
                if rec["step"] >= start:
                    break
                kept.append(line)
    write_atomic(log_file, "".join(kept))
    print(f"start {start}", flush=True)
    with open(log_file, "a") as log:
        while rank.state_dict()["cursor"]["next_step"] < int(steps):
            b = rank.next(timeout=30)
            log.write(json.dumps({"step": b.step, "item": item_of(bytes(b.data[0]))}) + "\n")
            log.flush()
            print(f"step {b.step}", flush=True)
            if (b.step + 1) % int(every) == 0:
                sd = rank.state_dict()
                write_atomic(state_file, json.dumps(sd))
                rank.checkpoint_committed(sd)
            time.sleep(float(delay))
    print("done", flush=True)


if __name__ == "__main__":
    main()
