"""Elastic resume: a checkpoint taken at DP=4 x CP=2 restored at DP=8 (CP=1) or DP=2
(CP=4): every DP-slice of every TGB is read exactly once, whole; an unconvertible layout
is an InvalidError, never a silent restart."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import pytest

import batchweave as bw
from conftest import Target
from payload import slice_bytes

D_T, C_T, TGBS, LEN = 4, 2, 12, 48

Reads = Dict[Tuple[int, int], List[Tuple[str, Tuple[int, int], bytes]]]


def produce(stream: bw.Stream) -> None:
    with stream.producer("p") as p:
        for q in range(1, TGBS + 1):
            slices = [slice_bytes("p", q, s, LEN) for s in range(D_T * C_T)]
            p.append(slices, dp=D_T, cp=C_T, source_offset=q)


def run_phase(
    stream: bw.Stream,
    phase: str,
    dp: int,
    cp: int,
    steps: Optional[int],
    state: Optional[Dict[str, Any]],
    reads: Reads,
) -> Dict[str, Any]:
    """All dp*cp ranks read `steps` steps (None: to the end of the stream)."""
    total = TGBS * D_T // dp
    saved: Dict[str, Any] = {}
    for rank in range(dp * cp):
        c = stream.consumer(group="g", dp=dp, cp=cp, rank=rank, world_size=dp * cp, state=state)
        start = c.state_dict()["cursor"]["next_step"]
        n = (total - start) if steps is None else steps
        for _ in range(n):
            b = c.next(timeout=10)
            for src, buf in zip(b.sources, b.data):
                d = src["first_slice"] // C_T
                part = tuple(src["part"]) if src["part"] else (0, 1)
                key = (src["tgb_step"], d)
                reads[key].append((phase, (src["first_slice"], part[0]), bytes(buf)))
        saved = c.state_dict()
        c.close()
    return saved


def check(reads: Reads) -> None:
    assert sorted(reads) == [(t, d) for t in range(TGBS) for d in range(D_T)], "skipped"
    for (t, d), got in reads.items():
        phases = {p for p, _, _ in got}
        assert len(phases) == 1, f"TGB {t} replica {d} read in phases {phases}"
        order = sorted(got, key=lambda g: g[1])
        assert len({g[1] for g in got}) == len(got), f"TGB {t} replica {d} read twice"
        whole = b"".join(g[2] for g in order)
        expected = b"".join(slice_bytes("p", t + 1, d * C_T + c, LEN) for c in range(C_T))
        assert whole == expected, f"TGB {t} replica {d}: wrong or partial bytes"


@pytest.mark.parametrize("to", [(8, 1), (2, 4), (4, 1), (1, 2)])
def test_restore_at_another_dp_and_cp(target: Target, to: Tuple[int, int]) -> None:
    stream = target.open()
    produce(stream)
    reads: Reads = defaultdict(list)
    saved = run_phase(stream, "before", 4, 2, 4, None, reads)
    assert saved["cursor"]["dp"] == 4 and saved["cursor"]["next_step"] == 4
    run_phase(stream, f"after-{to}", to[0], to[1], None, saved, reads)
    check(reads)


def test_unconvertible_layout_is_invalid(local: Target) -> None:
    stream = local.open()
    produce(stream)
    reads: Reads = defaultdict(list)
    # 3 steps at DP=4 are 12 DP-slices: not a whole number of DP=8 steps.
    saved = run_phase(stream, "before", 4, 2, 3, None, reads)
    with pytest.raises(bw.InvalidError):
        c = stream.consumer(group="g", dp=8, cp=1, rank=0, world_size=8, state=saved)
        c.next(timeout=10)
    # CP 2 -> 3 is not an integer ratio.
    with pytest.raises(bw.InvalidError):
        c = stream.consumer(group="g", dp=4, cp=3, rank=0, world_size=12, state=saved)
        c.next(timeout=10)
