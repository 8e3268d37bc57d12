"""BatchWeaveDataset with torch's DataLoader and torchdata's StatefulDataLoader: exact
resume twice, workers that fork, decode, RANK/WORLD_SIZE."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torch.utils.data import DataLoader  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

import batchweave as bw  # noqa: E402
from batchweave.torch import BatchWeaveDataset  # noqa: E402
from conftest import Target, produce_items  # noqa: E402
from payload import item_of  # noqa: E402

N = 24


def decode(b: bw.Batch) -> int:
    return item_of(bytes(b.data[0]))


def dataset(t: Target, **kw: Any) -> BatchWeaveDataset:
    return BatchWeaveDataset(
        t.url, group="train", dp=2, cp=1, rank=0, world_size=2, decode=decode,
        store_options=t.options, **kw
    )


@pytest.fixture
def filled(target: Target) -> Target:
    produce_items(target.open(), "p", list(range(1, N + 1)), dp=2, cp=1)
    return target


def take(it: Any, n: int) -> List[int]:
    return [int(next(it)) for _ in range(n)]


def test_dataloader_resume_twice(filled: Target) -> None:
    ds = dataset(filled)
    it = iter(DataLoader(ds, batch_size=None, num_workers=0))
    assert take(it, 5) == [1, 2, 3, 4, 5]
    sd1 = ds.state_dict()
    assert ds.state_dict() == sd1  # pure
    ds.checkpoint_committed(sd1)
    assert take(it, 3) == [6, 7, 8]

    ds2 = dataset(filled)
    ds2.load_state_dict(sd1)
    it2 = iter(DataLoader(ds2, batch_size=None, num_workers=0))
    assert take(it2, 4) == [6, 7, 8, 9]
    sd2 = ds2.state_dict()
    ds2.checkpoint_committed(sd2)
    take(it2, 2)

    ds3 = dataset(filled)
    ds3.load_state_dict(sd2)
    assert take(iter(DataLoader(ds3, batch_size=None)), 4) == [10, 11, 12, 13]


def test_decode_none_yields_batches(filled: Target) -> None:
    ds = BatchWeaveDataset(filled.url, "train", 2, 1, rank=1, world_size=2, store_options=filled.options)
    b = next(iter(ds))
    assert isinstance(b, bw.Batch) and b.step == 0
    arr = torch.frombuffer(bytearray(bytes(b.data[0])), dtype=torch.uint8)
    assert arr.numel() == 64


def test_rank_from_env(filled: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = BatchWeaveDataset(filled.url, "train", 2, 1, store_options=filled.options)
    assert (ds.rank, ds.world_size) == (1, 2)
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(bw.InvalidError):
        BatchWeaveDataset(filled.url, "train", 2, 1, store_options=filled.options)
    monkeypatch.delenv("RANK")
    ds = BatchWeaveDataset(filled.url, "train", 1, 1, store_options=filled.options)
    assert (ds.rank, ds.world_size) == (0, 1)


def test_workers_fork_and_keep_global_order(filled: Target) -> None:
    ds = dataset(filled)
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    it = iter(loader)
    assert take(it, N) == list(range(1, N + 1))
    del it


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resume_twice(filled: Target, workers: int) -> None:
    def loader(sd: Dict[str, Any] | None) -> StatefulDataLoader:
        dl = StatefulDataLoader(dataset(filled), batch_size=None, num_workers=workers)
        if sd is not None:
            dl.load_state_dict(sd)
        return dl

    dl = loader(None)
    it = iter(dl)
    assert take(it, 7) == list(range(1, 8))
    sd1 = dl.state_dict()
    dataset(filled).checkpoint_committed(sd1)
    take(it, 3)
    del it

    dl = loader(sd1)
    it = iter(dl)
    assert take(it, 5) == list(range(8, 13))
    sd2 = dl.state_dict()
    take(it, 2)
    del it

    dl = loader(sd2)
    it = iter(dl)
    assert take(it, 4) == list(range(13, 17))
    del it


def test_state_of_another_group_is_invalid(filled: Target) -> None:
    ds = dataset(filled)
    next(iter(ds))
    sd = ds.state_dict()
    other = BatchWeaveDataset(filled.url, "eval", 2, 1, rank=0, world_size=2, store_options=filled.options)
    with pytest.raises(bw.InvalidError, match="group"):
        other.load_state_dict(sd)
