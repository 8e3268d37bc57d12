"""BatchWeave: a consistent, brokerless training data plane on object storage.

Producers (preprocessing workers) commit global batches straight to object storage;
training ranks read exactly their slice, checkpoint a small state and resume exactly.
See docs/python.md for the API with examples.

    import batchweave as bw
    stream = bw.Stream.open("/tmp/run1")
    with stream.producer("prep-0") as p:
        p.append([b"d0", b"d1"], dp=2, cp=1, source_offset=1)
"""

from batchweave._native import (
    Batch,
    BatchWeaveError,
    Buffer,
    ConflictError,
    Consumer,
    DataError,
    DataReclaimedError,
    FencedError,
    InternalError,
    InvalidError,
    Producer,
    Stream,
    UnavailableError,
    __version__,
)

__all__ = [
    "Batch",
    "BatchWeaveError",
    "Buffer",
    "ConflictError",
    "Consumer",
    "DataError",
    "DataReclaimedError",
    "FencedError",
    "InternalError",
    "InvalidError",
    "Producer",
    "Stream",
    "UnavailableError",
    "__version__",
]
