from collections.abc import Mapping, Sequence
from typing import Any

import numpy
import numpy.typing


class PlanOptions:
    def __init__(self) -> None: ...

    @property
    def seed(self) -> int: ...

    @seed.setter
    def seed(self, arg: int, /) -> None: ...

    @property
    def epoch(self) -> int: ...

    @epoch.setter
    def epoch(self, arg: int, /) -> None: ...

    @property
    def shuffle(self) -> bool: ...

    @shuffle.setter
    def shuffle(self, arg: bool, /) -> None: ...

    @property
    def window_row_groups(self) -> int: ...

    @window_row_groups.setter
    def window_row_groups(self, arg: int, /) -> None: ...

    @property
    def global_shuffle(self) -> bool: ...

    @global_shuffle.setter
    def global_shuffle(self, arg: bool, /) -> None: ...

    @property
    def batch_size(self) -> int: ...

    @batch_size.setter
    def batch_size(self, arg: int, /) -> None: ...

    @property
    def world_size(self) -> int: ...

    @world_size.setter
    def world_size(self, arg: int, /) -> None: ...

    @property
    def rank(self) -> int: ...

    @rank.setter
    def rank(self, arg: int, /) -> None: ...

    @property
    def drop_last(self) -> bool: ...

    @drop_last.setter
    def drop_last(self, arg: bool, /) -> None: ...

    def validate(self) -> None:
        """Raises InvalidArgumentError for a setting out of range."""

def plan_sample_ids(row_group_rows: Sequence[int], options: PlanOptions) -> list[int]: ...

def plan_batch_sizes(row_group_rows: Sequence[int], options: PlanOptions) -> list[int]: ...

class TransformSpec:
    def __init__(self) -> None: ...

    @property
    def op(self) -> str: ...

    @op.setter
    def op(self, arg: str, /) -> None: ...

    @property
    def column(self) -> str: ...

    @column.setter
    def column(self, arg: str, /) -> None: ...

    @property
    def a(self) -> float: ...

    @a.setter
    def a(self, arg: float, /) -> None: ...

    @property
    def b(self) -> float: ...

    @b.setter
    def b(self, arg: float, /) -> None: ...

    @property
    def n(self) -> int: ...

    @n.setter
    def n(self, arg: int, /) -> None: ...

    @property
    def boundaries(self) -> list[float]: ...

    @boundaries.setter
    def boundaries(self, arg: Sequence[float], /) -> None: ...

    @property
    def a_values(self) -> list[float]:
        """Stacks: per-feature values of a (empty: a for every feature)."""

    @a_values.setter
    def a_values(self, arg: Sequence[float], /) -> None: ...

    @property
    def b_values(self) -> list[float]:
        """Stacks: per-feature values of b (empty: b for every feature)."""

    @b_values.setter
    def b_values(self, arg: Sequence[float], /) -> None: ...

    @property
    def values(self) -> list[bytes]:
        """
        Vocabulary: the values as bytes (str values as their UTF-8); setting it builds the lookup table once.
        """

    @values.setter
    def values(self, arg: Sequence[bytes], /) -> None: ...

    @property
    def dtype(self) -> str: ...

    @dtype.setter
    def dtype(self, arg: str, /) -> None: ...

def sample_uniform(sample_ids: numpy.typing.NDArray[numpy.int64], seed: int, epoch: int, stream: int, size: int) -> numpy.typing.NDArray[numpy.float64]: ...

class StackSpec:
    def __init__(self) -> None: ...

    @property
    def name(self) -> str: ...

    @name.setter
    def name(self, arg: str, /) -> None: ...

    @property
    def columns(self) -> list[str]: ...

    @columns.setter
    def columns(self, arg: Sequence[str], /) -> None: ...

class OutputOptions:
    def __init__(self) -> None: ...

    @property
    def columns(self) -> list[str]: ...

    @columns.setter
    def columns(self, arg: Sequence[str], /) -> None: ...

    @property
    def all_columns(self) -> bool: ...

    @all_columns.setter
    def all_columns(self, arg: bool, /) -> None: ...

    @property
    def stacks(self) -> list[StackSpec]: ...

    @stacks.setter
    def stacks(self, arg: Sequence[StackSpec], /) -> None: ...

    @property
    def with_sample_id(self) -> bool: ...

    @with_sample_id.setter
    def with_sample_id(self, arg: bool, /) -> None: ...

    @property
    def fill_null(self) -> float | None: ...

    @fill_null.setter
    def fill_null(self, arg: float | None) -> None: ...

    @property
    def fill_null_columns(self) -> dict[str, float]: ...

    @fill_null_columns.setter
    def fill_null_columns(self, arg: Mapping[str, float], /) -> None: ...

    @property
    def transforms(self) -> list[TransformSpec]: ...

    @transforms.setter
    def transforms(self, arg: Sequence[TransformSpec], /) -> None: ...

class Dataset:
    def __init__(self, sources: Sequence[str], num_threads: int = 8, partitioning: str = 'hive', remote_timeout: float = 60.0, only_files: Sequence[str] = [], base_dirs: Sequence[str] = [], source_globs: Sequence[int] = []) -> None:
        """
        partitioning: "hive" (key=value folders become columns) or "" (none); only_files: non-empty, of the listed files only these (relative paths); base_dirs: folders the root must contain (the fixed parts of expanded globs); source_globs: per source, the expanded glob it came from, -1 for none.
        """

    @property
    def num_rows(self) -> int: ...

    @property
    def num_files(self) -> int: ...

    @property
    def num_row_groups(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def root(self) -> str: ...

    @property
    def is_local(self) -> bool: ...

    def file_sizes(self) -> list[int]: ...

    def file_versions(self) -> list[str]:
        """
        Per file: its modification time and, for a local file, device, inode and change time, as text.
        """

    def delta_tables(self) -> list[tuple[str, int, int]]: ...

    def files(self) -> list[str]: ...

    def row_groups(self) -> list[tuple[int, int, int, int, int]]: ...

    def schema(self) -> list[tuple[str, str]]: ...

    def columns(self) -> list[tuple[str, str, int, list[str], int, str]]:
        """
        Where each dataset column comes from: (name, type, partition key or -1, the types in the files, files that lack it, conflict).
        """

    def describe_outputs(self, arg: OutputOptions, /) -> list[tuple[str, str, list[int], str, str]]: ...

    def vocabulary(self, column: str, min_count: int = 1, max_size: int | None = None, num_threads: int = 4) -> list[str | bytes]:
        """
        The distinct values of a string (str) or binary (bytes) column, most frequent first (ties by value).
        """

    def filtered(self, dnf: Sequence[Sequence[tuple[str, str, Sequence[bool | int | float | str]]]], key: str, num_threads: int = 8, image: bytes | None = None) -> Dataset:
        """
        The dataset restricted to the rows that pass `dnf` (OR of ANDs of (column, op, values)); `image`: a cached result, used when it is valid for this catalog and key.
        """

    def filter_image(self) -> bytes: ...

    def filter_selection(self) -> str:
        r"""
        Which rows pass the filter, as 16 hex digits (\'\' without a filter): part of a filtered stream's fingerprint, since the rows a filter keeps follow the values.
        """

    def filter_counts(self) -> dict[str, int]: ...

    def num_batches(self, arg: PlanOptions, /) -> int: ...

class CacheOptions:
    def __init__(self) -> None: ...

    @property
    def limit_bytes(self) -> int: ...

    @limit_bytes.setter
    def limit_bytes(self, arg: int, /) -> None: ...

    def validate(self) -> None:
        """Raises InvalidArgumentError for a limit out of range."""

class DecodedTier:
    def stats(self) -> dict[str, int]: ...

    def usage(self) -> tuple[int, int]:
        """(entries, bytes) in the folder, scanned now."""

    def clear(self) -> int:
        """Removes every complete entry; returns the bytes freed."""

    @property
    def dir(self) -> str: ...

    @property
    def read_only(self) -> bool:
        """Whether the folder opened read-only: entries served, none stored."""

class FileCache:
    def stats(self) -> dict[str, Any]: ...

    def usage(self) -> tuple[int, int]: ...

    def clear(self) -> int: ...

    def warm(self, dataset: Dataset, file: int) -> bool:
        """Downloads file number `file` of the dataset unless cached."""

def open_file_cache(dir: str, limit_bytes: int, remote_timeout: float = 60.0) -> FileCache:
    """
    remote_timeout: seconds without data after which a download gives up (0: never).
    """

def open_decoded_tier(dir: str, limit_bytes: int) -> DecodedTier: ...

class OutputArena:
    """Slabs of memory that batch buffers come from (pin_memory=True)."""

    def __init__(self) -> None: ...

    def add_slab(self, address: int, size: int, owner: object) -> None:
        """
        Adds [address, address + size), which `owner` keeps alive (until the arena and every buffer from it are gone).
        """

    def contains(self, address: int) -> bool: ...

    def stats(self) -> dict[str, int]: ...

class EngineLeftovers:
    """Idle matrices and batch buffers one engine leaves to the next."""

    def __init__(self) -> None: ...

    @property
    def bytes(self) -> int:
        """Bytes held now (between engines)."""

    def clear(self) -> None:
        """Frees what it holds."""

class EngineOptions:
    def __init__(self) -> None: ...

    @property
    def output(self) -> OutputOptions: ...

    @output.setter
    def output(self, arg: OutputOptions, /) -> None: ...

    @property
    def num_threads(self) -> int: ...

    @num_threads.setter
    def num_threads(self, arg: int, /) -> None: ...

    @property
    def queue_depth(self) -> int: ...

    @queue_depth.setter
    def queue_depth(self, arg: int, /) -> None: ...

    @property
    def start_batch(self) -> int: ...

    @start_batch.setter
    def start_batch(self, arg: int, /) -> None: ...

    @property
    def batch_offset(self) -> int: ...

    @batch_offset.setter
    def batch_offset(self, arg: int, /) -> None: ...

    @property
    def batch_stride(self) -> int: ...

    @batch_stride.setter
    def batch_stride(self, arg: int, /) -> None: ...

    @property
    def decoded_tier(self) -> DecodedTier: ...

    @decoded_tier.setter
    def decoded_tier(self, arg: DecodedTier, /) -> None: ...

    @property
    def file_cache(self) -> FileCache: ...

    @file_cache.setter
    def file_cache(self, arg: FileCache, /) -> None: ...

    @property
    def prefetch_bytes(self) -> int: ...

    @prefetch_bytes.setter
    def prefetch_bytes(self, arg: int, /) -> None: ...

    @property
    def memory_limit(self) -> int: ...

    @memory_limit.setter
    def memory_limit(self, arg: int, /) -> None: ...

    @property
    def trace(self) -> bool: ...

    @trace.setter
    def trace(self, arg: bool, /) -> None: ...

    @property
    def debug_max_delay_us(self) -> int: ...

    @debug_max_delay_us.setter
    def debug_max_delay_us(self, arg: int, /) -> None: ...

    @property
    def debug_slow_stage(self) -> str: ...

    @debug_slow_stage.setter
    def debug_slow_stage(self, arg: str, /) -> None: ...

    @property
    def debug_slow_us(self) -> int: ...

    @debug_slow_us.setter
    def debug_slow_us(self, arg: int, /) -> None: ...

    @property
    def remote_timeout(self) -> float: ...

    @remote_timeout.setter
    def remote_timeout(self, arg: float, /) -> None: ...

    @property
    def verify_page_checksums(self) -> bool: ...

    @verify_page_checksums.setter
    def verify_page_checksums(self, arg: bool, /) -> None: ...

    @property
    def output_arena(self) -> OutputArena: ...

    @output_arena.setter
    def output_arena(self, arena: OutputArena | None) -> None: ...

    @property
    def leftovers(self) -> EngineLeftovers: ...

    @leftovers.setter
    def leftovers(self, leftovers: EngineLeftovers | None) -> None: ...

    def validate(self) -> None:
        """Raises InvalidArgumentError for a setting out of range."""

class Engine:
    def __init__(self, dataset: Dataset, plan: PlanOptions, options: EngineOptions) -> None: ...

    def next(self) -> dict[str, numpy.typing.NDArray[Any]] | None:
        """
        The next batch as {name: array}, None after the last; raises the first error.
        """

    def close(self) -> None: ...

    def cancel(self) -> None:
        """
        Stops the workers without waiting for them (after Ctrl-C); close() joins them.
        """

    @property
    def num_units(self) -> int: ...

    @property
    def num_batches(self) -> int: ...

    @property
    def memory_held(self) -> int:
        """Bytes held now: booked in the memory budget and idle (kept for reuse)."""

    @property
    def decodes_started(self) -> bool:
        """
        Every row group of the last window its units read has begun to decode (it books no more memory from now on).
        """

    def trace(self) -> list[tuple[int, str, float, float, int]]:
        """
        Timeline events (worker, stage, start_us, duration_us, arg); needs options.trace.
        """

    def stats(self) -> dict[str, Any]: ...

def plan_memory(dataset: Dataset, plan: PlanOptions, options: EngineOptions) -> dict[str, Any]:
    """
    The shuffle window (plan.window_row_groups == 0: chosen from options.memory_limit), the expected peak of stats()['memory'] and the expected mixing W_eff, from the footers.
    """

def wait_for_abandoned_calls(seconds: float) -> bool:
    """
    From the exit hook: waits until no remote call given up at its deadline still runs (or `seconds` pass), so that pyarrow's S3 shutdown does not tear the AWS SDK down under one; whether none runs.
    """

def wait_for_engines_being_made(seconds: float) -> bool:
    """
    From the exit hook, after begin_exit: waits until no engine is being made on another thread (each one made from now on is stopped as its thread parks), or `seconds` pass; whether none is.
    """

def live_buffers() -> int:
    """Batch buffers allocated by the engine and not yet freed (for tests)."""

def live_engine_threads() -> int:
    """
    Engine worker and prefetcher threads that have not returned yet (for tests).
    """

def begin_exit(quiet_leaks: bool) -> None:
    """
    From the exit hook: other threads no longer take the GIL back in this module (they sleep until the process ends); quiet_leaks: no leak report (other threads hold objects).
    """
