"""shardfeed: feed training jobs from Parquet in one reproducible order.

``Loader`` runs a C++ engine that reads, shuffles and batches Parquet row groups
on its own threads and hands each batch to Python once, zero-copy.  The order of
samples in an epoch depends only on the data, the seed, the epoch and the
shuffle settings.  ``TorchDataset`` gives the same stream through a
``torch.utils.data.DataLoader``.
"""

from typing import Any as _Any

import pyarrow as _pyarrow  # noqa: F401  (loads Arrow's shared libraries before the extension)
import pyarrow.fs as _pyarrow_fs  # noqa: F401  (registers S3/GCS/HDFS, and S3's shutdown hook)

from . import transforms
from ._errors import (
    ArgumentTypeError,
    ColumnNotFoundError,
    DatasetNotFoundError,
    InvalidArgumentError,
    InvalidDataError,
    LoaderClosedError,
    SchemaMismatchError,
    ShardfeedError,
    StateDictError,
    StorageError,
    UnsupportedTypeError,
)
from ._loader import Loader
from ._random import sample_rng, sample_uniform
from ._vocabulary import vocabulary

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError",
    "ColumnNotFoundError",
    "DatasetNotFoundError",
    "InvalidArgumentError",
    "InvalidDataError",
    "Loader",
    "LoaderClosedError",
    "SchemaMismatchError",
    "ShardfeedError",
    "StateDictError",
    "StorageError",
    "TorchDataset",
    "UnsupportedTypeError",
    "sample_rng",
    "sample_uniform",
    "transforms",
    "vocabulary",
]


def __getattr__(name: str) -> _Any:
    # TorchDataset imports torch; numpy-only users never pay for it.
    if name == "TorchDataset":
        from ._torch import TorchDataset

        return TorchDataset
    raise AttributeError(f"module 'shardfeed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"TorchDataset"})
