"""A producer process: appends items committed_offset+1 .. total (one TGB per item,
source offset = item), printing each appended item. Killed and restarted with the same id
it must end with every item committed exactly once."""

from __future__ import annotations

import json
import sys
import time

import batchweave as bw

sys.path.insert(0, sys.argv[1])
from payload import item_slices  # noqa: E402


def main() -> None:
    _, _tests, url, options, pid, total, delay = sys.argv
    stream = bw.Stream.open(url, **json.loads(options))
    with stream.producer(pid, policy="fixed:2") as p:
        print(f"open {p.committed_offset}", flush=True)
        for item in range(p.committed_offset + 1, int(total) + 1):
            p.append(item_slices(item, 2, 1, 256), dp=2, cp=1, source_offset=item)
            print(f"appended {item}", flush=True)
            time.sleep(float(delay))
    print("done", flush=True)


if __name__ == "__main__":
    main()
