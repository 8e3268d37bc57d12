"""PyTorch integration: :class:`BatchWeaveDataset`, an ``IterableDataset`` that resumes exactly.

It is also a ``Stateful`` (``state_dict`` / ``load_state_dict``), so torchdata's
``StatefulDataLoader`` and ``torch.distributed.checkpoint`` save and restore it.

* Rank and world size come from ``RANK`` / ``WORLD_SIZE`` unless given (0 and 1 when
  neither is set; ``InvalidError`` when only one is).
* With ``DataLoader(num_workers=n)``, worker ``k`` yields the steps with ``step % n == k``,
  so the in-order loader keeps the global order. Every worker opens its own stream and
  consumer in its own process (after the fork), never inheriting the parent's runtime.
* ``state_dict()`` is pure and cheap (no I/O); the watermark moves only in
  ``checkpoint_committed``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

try:
    import torch.utils.data
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "batchweave.torch needs PyTorch: pip install torch (and torchdata for "
        "StatefulDataLoader)"
    ) from e

from batchweave import Batch, Consumer, InvalidError, Stream

__all__ = ["BatchWeaveDataset", "resolve_rank"]

STATE_FORMAT = "batchweave-torch-state/1"


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None:
        return None
    try:
        n = int(v.strip())
    except ValueError:
        raise InvalidError(f"environment variable {name}={v!r} is not an integer") from None
    if n < 0:
        raise InvalidError(f"environment variable {name}={v!r} is negative")
    return n


def resolve_rank(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    """Rank and world size: the arguments, else ``RANK`` / ``WORLD_SIZE``, else 0 and 1."""
    r = rank if rank is not None else _env_int("RANK")
    w = world_size if world_size is not None else _env_int("WORLD_SIZE")
    if r is None and w is None:
        return 0, 1
    if r is None or w is None:
        missing = "RANK (rank=)" if r is None else "WORLD_SIZE (world_size=)"
        raise InvalidError(
            f"only one of RANK / WORLD_SIZE is known; {missing} is missing: set both "
            "(torchrun does) or pass rank= and world_size="
        )
    return r, w


def _find_states(obj: Any, out: List[Dict[str, Any]]) -> None:
    if isinstance(obj, Mapping):
        if obj.get("format") == STATE_FORMAT:
            out.append(dict(obj))
            return
        for v in obj.values():
            _find_states(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _find_states(v, out)


class BatchWeaveDataset(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """One training rank's view of a BatchWeave stream, as a PyTorch ``IterableDataset``.

    Yields :class:`batchweave.Batch` objects, or ``decode(batch)`` when ``decode`` is
    given. ``consumer_options`` go to ``Stream.consumer`` (``prefetch``, ``read_mode``,
    ``poll_min``, ``poll_max``, ``token_bytes``); ``store_options`` to ``Stream.open``.
    """

    def __init__(
        self,
        url: str,
        group: str,
        dp: int,
        cp: int,
        tp: int = 1,
        pp: int = 1,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        decode: Optional[Callable[[Batch], Any]] = None,
        *,
        store_options: Optional[Mapping[str, Any]] = None,
        **consumer_options: Any,
    ) -> None:
        super().__init__()
        self.url = url
        self.group = group
        self.dp, self.cp, self.tp, self.pp = dp, cp, tp, pp
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.decode = decode
        self.store_options = dict(store_options or {})
        self.consumer_options = consumer_options
        self._loaded: Optional[Dict[str, Any]] = None
        self._pid: Optional[int] = None
        self._stream: Optional[Stream] = None
        self._consumer: Optional[Consumer] = None
        self._worker: Tuple[int, int] = (0, 1)

    # -- process-local handles (never inherited through fork) --------------------------
    def _local_stream(self) -> Stream:
        if self._pid != os.getpid():
            self._stream, self._consumer, self._pid = None, None, os.getpid()
        if self._stream is None:
            self._stream = Stream.open(self.url, **self.store_options)
        return self._stream

    def _open_consumer(self, state: Optional[Dict[str, Any]]) -> Consumer:
        return self._local_stream().consumer(
            group=self.group,
            dp=self.dp,
            cp=self.cp,
            tp=self.tp,
            pp=self.pp,
            rank=self.rank,
            world_size=self.world_size,
            state=state,
            **self.consumer_options,
        )

    # -- IterableDataset ---------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        k, n = (info.id, info.num_workers) if info is not None else (0, 1)
        loaded = self._loaded
        if loaded is not None and tuple(loaded.get("worker", (0, 1))) != (k, n):
            raise InvalidError(
                f"the state was saved by DataLoader worker {loaded.get('worker')} (worker, "
                f"num_workers) and is loaded into worker {(k, n)}: restore with the same "
                "num_workers"
            )
        if self._consumer is not None:
            self._consumer.close()
        self._worker = (k, n)
        self._consumer = None
        consumer = self._open_consumer(loaded["consumer"] if loaded else None)
        self._consumer = consumer
        decode = self.decode
        for batch in consumer:
            if batch.step % n != k:
                continue
            yield decode(batch) if decode is not None else batch

    # -- Stateful ----------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """The cursor after the last yielded item (pure: no I/O, no side effect)."""
        if self._consumer is not None and self._pid == os.getpid():
            consumer: Optional[Dict[str, Any]] = self._consumer.state_dict()
            worker = list(self._worker)
        elif self._loaded is not None:
            consumer = self._loaded["consumer"]
            worker = list(self._loaded.get("worker", (0, 1)))
        else:
            consumer, worker = None, [0, 1]
        return {"format": STATE_FORMAT, "consumer": consumer, "worker": worker}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores the cursor; the next iteration continues right after it."""
        if not isinstance(state_dict, Mapping) or state_dict.get("format") != STATE_FORMAT:
            raise InvalidError(
                "not a BatchWeaveDataset state dict (format "
                f"{getattr(state_dict, 'get', lambda _k: None)('format')!r}, expected "
                f"{STATE_FORMAT!r})"
            )
        sd = dict(state_dict)
        if sd.get("consumer") is not None:
            # Check stream and group now (a clear error at load, not at iteration).
            c = sd["consumer"]
            if not isinstance(c, Mapping):
                raise InvalidError("the state dict's consumer entry is not a dict")
            stream = self._local_stream()
            if c.get("stream") != stream.identity:
                raise InvalidError(
                    f"the state dict belongs to stream {c.get('stream')!r}, not to "
                    f"{stream.identity!r}"
                )
            if c.get("group") != self.group:
                raise InvalidError(
                    f"the state dict belongs to consumer group {c.get('group')!r}, not to "
                    f"{self.group!r}"
                )
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._loaded = sd

    def checkpoint_committed(self, state_dict: Mapping[str, Any]) -> None:
        """Call once the checkpoint holding ``state_dict`` is durable: advances this rank's
        watermark (GC may then reclaim older data). Accepts this dataset's state dict or a
        ``StatefulDataLoader`` state dict (with workers: the oldest worker cursor counts).
        """
        found: List[Dict[str, Any]] = []
        _find_states(state_dict, found)
        cursors = [s["consumer"] for s in found if s.get("consumer") is not None]
        if not found:
            raise InvalidError("no BatchWeaveDataset state found in the given state dict")
        if not cursors:
            return
        oldest = min(cursors, key=lambda c: int(c["cursor"]["next_step"]))
        if self._consumer is not None and self._pid == os.getpid():
            self._consumer.checkpoint_committed(oldest)
            return
        marker = self._open_consumer(oldest)
        try:
            marker.checkpoint_committed(oldest)
        finally:
            marker.close()
