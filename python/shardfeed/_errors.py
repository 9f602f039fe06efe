"""Exceptions raised by shardfeed.

Each class derives from :class:`ShardfeedError` and from the Python builtin that
fits it, so ``except FileNotFoundError`` or ``except ValueError`` work as usual.
Messages name the file, row group and column involved.
"""

from __future__ import annotations


class ShardfeedError(Exception):
    """Base class of every shardfeed error."""


class DatasetNotFoundError(ShardfeedError, FileNotFoundError):
    """A source path does not exist, or a folder holds no Parquet files."""


class InvalidDataError(ShardfeedError, ValueError):
    """A file is not Parquet, is truncated or corrupt, or holds a null where none is allowed."""


class SchemaMismatchError(InvalidDataError):
    """The files of a dataset do not share one schema."""


class ColumnNotFoundError(ShardfeedError, KeyError):
    """A requested column is not in the dataset."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnsupportedTypeError(ShardfeedError, TypeError):
    """A column's type cannot become a tensor."""


class InvalidArgumentError(ShardfeedError, ValueError):
    """A setting is out of range (batch_size < 1, a bad rank, ...)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (``rank=0.5``, ``prefetch="8"``, ``source=None``).

    Also a ``TypeError``; an ``InvalidArgumentError`` (``ValueError``) too, so that code
    catching the latter for every bad setting keeps working.
    """


class StateDictError(ShardfeedError, ValueError):
    """A state dict was made for another dataset or other settings."""


class StorageError(ShardfeedError, OSError):
    """Reading from storage failed."""


class LoaderClosedError(ShardfeedError, RuntimeError):
    """The loader's engine was closed while a batch was awaited."""


__all__ = [
    "ArgumentTypeError",
    "ColumnNotFoundError",
    "DatasetNotFoundError",
    "InvalidArgumentError",
    "InvalidDataError",
    "LoaderClosedError",
    "SchemaMismatchError",
    "ShardfeedError",
    "StateDictError",
    "StorageError",
    "UnsupportedTypeError",
]
