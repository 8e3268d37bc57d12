"""Type stubs of the native module (the Rust bindings)."""

from types import TracebackType
from typing import Any, ClassVar, Dict, Iterator, List, Literal, Optional, Sequence, Type, Union

from typing_extensions import Buffer as _BufferLike

__version__: str

Kind = Literal["conflict", "fenced", "unavailable", "invalid", "data", "internal"]

class BatchWeaveError(Exception):
    kind: ClassVar[Kind]
    retryable: ClassVar[bool]

class ConflictError(BatchWeaveError): ...
class FencedError(BatchWeaveError): ...
class UnavailableError(BatchWeaveError): ...
class InvalidError(BatchWeaveError): ...
class DataError(BatchWeaveError): ...
class DataReclaimedError(DataError): ...
class InternalError(BatchWeaveError): ...

class Buffer:
    """Read-only bytes exported through the buffer protocol (no copy)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...

class Batch:
    @property
    def step(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def data(self) -> List[Buffer]: ...
    @property
    def sources(self) -> List[Dict[str, Any]]: ...

class Producer:
    @property
    def id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def stats(self) -> Dict[str, Any]: ...
    def append(
        self,
        slices: Sequence[Union[bytes, bytearray, memoryview, Buffer, _BufferLike]],
        *,
        dp: int,
        cp: int,
        source_offset: int,
    ) -> Dict[str, Any]:
        """Uploads one global batch of `dp * cp` slices, slice `(d, c)` at index
        `d * cp + c`; returns `{"sequence", "key", "object_size"}` once it is durable.

        The slices are read in place, not copied (`bytes`, `Buffer` and any C-contiguous
        buffer: bytearray, numpy array, memoryview; a non-contiguous one is copied once),
        with the GIL released: do not mutate a buffer while `append` is running on it.
        When it returns the bytes are uploaded and the buffers are free to reuse.
        """
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Producer": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]] = None,
        exc: Optional[BaseException] = None,
        tb: Optional[TracebackType] = None,
    ) -> bool: ...

class Consumer:
    @property
    def group(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def stats(self) -> Dict[str, Any]: ...
    def next(self, timeout: Optional[float] = None) -> Batch: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def checkpoint_committed(self, state: Dict[str, Any]) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Consumer": ...
    def __exit__(self, *args: object) -> bool: ...

class Stream:
    @staticmethod
    def open(url: str, **options: Union[str, bool, int, float]) -> "Stream": ...
    @property
    def url(self) -> str: ...
    @property
    def identity(self) -> str: ...
    def producer(
        self,
        id: str,
        *,
        policy: str = "coop",
        max_lag: Optional[int] = None,
        max_buffered: Optional[int] = None,
        lag_poll: Optional[float] = None,
        multipart_threshold: Optional[int] = None,
        multipart_part_size: Optional[int] = None,
        max_commit_age: Optional[float] = None,
        seed: Optional[int] = None,
        single_worker: bool = False,
        slice_layout: str = "auto",
    ) -> Producer: ...
    def consumer(
        self,
        *,
        group: str,
        dp: int,
        cp: int,
        tp: int = 1,
        pp: int = 1,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        state: Optional[Dict[str, Any]] = None,
        prefetch: Optional[int] = None,
        read_mode: Optional[str] = None,
        poll_min: Optional[float] = None,
        poll_max: Optional[float] = None,
        token_bytes: Optional[int] = None,
    ) -> Consumer: ...
    def inspect(self) -> Dict[str, Any]: ...
    def gc(
        self,
        dry_run: bool = False,
        *,
        orphan_grace: Optional[float] = 3600.0,
        orphan_margin: Optional[float] = None,
        producers_stopped: bool = False,
        dead_group_after: Optional[float] = None,
    ) -> Dict[str, Any]: ...
