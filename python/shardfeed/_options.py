"""Argument checking and conversion shared by Loader and TorchDataset (private)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import _core, _filter
from ._check import (
    INT32,
    INT64,
    UINT64,
    FillNull,
    Sources,
    check_bool,
    check_bytes,
    check_callable,
    check_fill_null,
    check_int,
    check_list,
    check_names,
    check_opt_float,
    check_opt_int,
    check_path,
    check_shuffle,
    check_source,
    check_stack,
    check_str,
)
from ._device import check_device
from ._errors import ArgumentTypeError, InvalidArgumentError, StorageError
from ._filter import Canonical
from .transforms import Transform, to_core

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
StackArg = Mapping[str, Sequence[str]]

_OUTPUTS = ("torch", "numpy", "jax")
_PARTITIONINGS = ("hive", None)

# The defaults are the C++ core's (shardfeed/plan.h, engine.h, catalog.h): a
# default-constructed options struct is the one place they are written.
_PLAN = _core.PlanOptions()
_ENGINE = _core.EngineOptions()
DEFAULT_BATCH_SIZE: int = _PLAN.batch_size
DEFAULT_SHUFFLE: bool = _PLAN.shuffle
DEFAULT_SEED: int = _PLAN.seed
DEFAULT_DROP_LAST: bool = _PLAN.drop_last
DEFAULT_MEMORY_LIMIT: int = _ENGINE.memory_limit
DEFAULT_PREFETCH: int = _ENGINE.queue_depth
DEFAULT_PREFETCH_BYTES: int = _ENGINE.prefetch_bytes
DEFAULT_REMOTE_TIMEOUT: float = _ENGINE.remote_timeout


def _env_int(name: str) -> int | None:
    """An integer environment variable: ASCII digits only (int() would take "1_0" and
    other scripts' digits), in int64's range."""
    text = os.environ.get(name)
    if text is None:
        return None
    if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) is None:
        raise InvalidArgumentError(
            f"the {name} environment variable must be an integer, got {text!r}"
        )
    value = int(text)
    if not INT64[0] <= value < INT64[1]:
        raise InvalidArgumentError(
            f"the {name} environment variable is out of range: {text.strip()}"
        )
    return value


def _missing(module: str) -> bool:
    """Whether `module` cannot be imported (found without importing it)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError, AttributeError):  # sys.modules[module] is None, ...
        return True


def _resolve_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """rank/world_size: given, else torch.distributed, else RANK/WORLD_SIZE, else 0/1."""
    if rank is not None and world_size is not None:
        return rank, world_size
    if rank is None and world_size == 1:
        # The whole dataset in this process (an evaluation loader inside a torchrun
        # job): its one rank is 0, whatever RANK or the process group say.
        return 0, 1
    dist_rank = dist_world = None
    # A process group exists only where torch is imported already: importing it
    # here just to ask would cost every numpy-only loader a second.
    dist = sys.modules.get("torch.distributed")
    where = "torch.distributed"
    world_known = True  # the world the rank below is of is said, not assumed
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist_rank, dist_world = dist.get_rank(), dist.get_world_size()
    if dist_rank is None or dist_world is None:
        env_rank, env_world = _env_int("RANK"), _env_int("WORLD_SIZE")
        world = world_size if world_size is not None else env_world
        if rank is None and env_rank is None and world is not None and world > 1:
            # Every such process would be rank 0 and read the same slice.
            said = (
                f"world_size={world_size}"
                if world_size is not None
                else f"WORLD_SIZE={os.environ['WORLD_SIZE']!r}"
            )
            raise InvalidArgumentError(
                f"{said} is given but no rank (neither rank= nor RANK): say which rank this "
                "process is (rank=, or RANK as torchrun sets it)"
            )
        dist_rank = 0 if env_rank is None else env_rank
        dist_world = 1 if env_world is None else env_world
        world_known = env_world is not None
        where = (
            f"the environment, RANK={os.environ.get('RANK')!r} and "
            f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r}"
        )
    if (
        rank is None
        and world_size is not None
        and world_size >= 1  # below 1: the settings' check names it
        and world_known
        and world_size != dist_world
    ):
        # Rank 1 of 2 taken as rank 1 of 4: ranks 2 and 3 never run, half the data unread.
        raise InvalidArgumentError(
            f"world_size={world_size} is given, but the rank would come from {where}, "
            f"whose world has {dist_world} ranks: pass rank= too, or that world_size"
        )
    given = [
        name for name, value in (("rank", rank), ("world_size", world_size)) if value is not None
    ]
    rank = dist_rank if rank is None else rank
    world_size = dist_world if world_size is None else world_size
    # (A world_size below 1, given, is the settings' check to name.)
    if world_size >= 1 and not 0 <= rank < world_size:
        # Where they came from, which the user may not know (a variable a launcher set).
        came = f"from {where}" + (f"; {given[0]}= given" if given else "")
        raise InvalidArgumentError(
            f"rank {rank} is not in [0, world_size {world_size}): {came} (pass rank= and "
            "world_size=, or set RANK and WORLD_SIZE both, as torchrun does)"
        )
    return rank, world_size


def default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, 16))


@dataclass(frozen=True)
class CacheSettings:
    """Where and how much to cache (see Loader's cache_* arguments)."""

    dir: str | None = None
    limit_bytes: int = 0  # 0: unlimited
    decoded: bool = False
    prefetch_bytes: int = DEFAULT_PREFETCH_BYTES

    @classmethod
    def make(
        cls,
        cache_dir: str | os.PathLike[str] | None,
        cache_limit_bytes: int | None,
        cache_decoded: bool,
        prefetch_bytes: int | None,
    ) -> CacheSettings:
        root = None if cache_dir is None else check_path("cache_dir", cache_dir)
        if root is not None and "://" not in root:
            # "~/cache", as sources take it; absolute, so that a later os.chdir (Hydra,
            # job launchers) does not move the cache out from under the loader.
            root = os.path.abspath(os.path.expanduser(root))
        # Checked here, not where it is first used: local data may never use it,
        # and a mistake should not wait for the first remote or decoded-cache run.
        if root is not None and "://" not in root:
            _check_folder_path("cache_dir", root)
        decoded = check_bool("cache_decoded", cache_decoded)
        if decoded and root is None:
            raise InvalidArgumentError("cache_decoded=True needs a cache_dir")
        limit = _core.CacheOptions()
        limit.limit_bytes = check_opt_int("cache_limit_bytes", cache_limit_bytes) or 0
        limit.validate()
        ahead = check_opt_int("prefetch_bytes", prefetch_bytes)
        return cls(
            dir=root,
            limit_bytes=limit.limit_bytes,
            decoded=decoded,
            prefetch_bytes=cls.prefetch_bytes if ahead is None else ahead,
        )

    def decoded_dir(self) -> str | None:
        return os.path.join(self.dir, "decoded") if self.dir and self.decoded else None

    def files_dir(self) -> str | None:
        return os.path.join(self.dir, "files") if self.dir else None


def _check_folder_path(name: str, folder: str) -> None:
    """A folder that is a file, or lies below one, is the caller's mistake (said as
    such, not as a failed write later): the nearest part of the path that exists
    must be a folder."""
    nearest = folder
    while not os.path.lexists(nearest) and nearest != os.path.dirname(nearest):
        nearest = os.path.dirname(nearest)
    if not os.path.exists(nearest) or os.path.isdir(nearest):
        return
    if nearest == folder:
        raise InvalidArgumentError(f"{name} {folder!r} exists and is not a folder")
    raise InvalidArgumentError(
        f"{name} {folder!r} cannot be made: {nearest!r} is a file, not a folder"
    )


@dataclass
class Settings:
    """Everything that decides the stream, checked once."""

    sources: list[str]
    columns: list[str] | None
    batch_size: int
    shuffle: bool | str  # True, False or "global"
    seed: int
    rank: int
    world_size: int
    drop_last: bool
    num_threads: int
    stack: dict[str, list[str]]
    output: str
    shuffle_window: int | None  # None: chosen from memory_limit by resolve()
    prefetch: int
    with_sample_id: bool
    fill_null: FillNull
    transforms: list[Transform]
    transform: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None
    cache: CacheSettings
    partitioning: str | None = "hive"
    filter_arg: Any = None  # as given; checked against the schema once it is open
    filter: Canonical | None = None  # the canonical form, set by open_filtered
    extra: dict[str, Any] = field(default_factory=dict)
    num_threads_given: bool = False  # else num_threads is the CPU-count default
    remote_timeout: float = DEFAULT_REMOTE_TIMEOUT
    verify_page_checksums: bool = False
    pin_memory: bool = False  # batch buffers from a PinnedArena
    device: str | None = None  # "cuda[:N]": batches copied there one ahead
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # 0: none
    memory_plan: dict[str, Any] | None = None  # _core.plan_memory's, set by resolve()

    @classmethod
    def make(cls, args: Mapping[str, Any]) -> Settings:
        """Checks the arguments of Loader/TorchDataset (by name) before anything is opened:
        their types here, their ranges in C++ (one message per mistake)."""
        columns = args["columns"]
        output = check_str("output", args["output"])
        if output not in _OUTPUTS:
            raise InvalidArgumentError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if output != "numpy" and _missing(output):
            # Said now, not as a bare ModuleNotFoundError at the first batch.
            raise InvalidArgumentError(
                f"output={output!r} needs {output} installed (pip install {output}), "
                "or output='numpy'"
            )
        partitioning = args["partitioning"]
        if partitioning is not None and not isinstance(partitioning, str):
            raise ArgumentTypeError(
                f"partitioning must be one of {_PARTITIONINGS}, got {type(partitioning).__name__} "
                f"{partitioning!r}"
            )
        if partitioning not in _PARTITIONINGS:
            raise InvalidArgumentError(
                f"partitioning must be one of {_PARTITIONINGS}, got {partitioning!r}"
            )
        if args["filter"] is not None:
            _filter.check_form(args["filter"])  # its form before anything is opened
        transforms = check_list("transforms", args["transforms"])
        to_core(transforms)  # settings errors before anything is opened
        threads = check_opt_int("num_threads", args["num_threads"], INT32)
        timeout = check_opt_float("remote_timeout", args["remote_timeout"])
        rank, world = _resolve_world(
            check_opt_int("rank", args["rank"]), check_opt_int("world_size", args["world_size"])
        )
        pin_memory, device = check_device(args["pin_memory"], args["device"], output)
        settings = cls(
            sources=check_source(args["source"]),
            columns=None if columns is None else check_names("columns", columns),
            batch_size=check_int("batch_size", args["batch_size"]),
            shuffle=check_shuffle(args["shuffle"]),
            seed=check_int("seed", args["seed"], UINT64),
            rank=rank,
            world_size=world,
            drop_last=check_bool("drop_last", args["drop_last"]),
            num_threads=default_threads() if threads is None else threads,
            num_threads_given=threads is not None,
            stack=check_stack(args["stack"]),
            output=output,
            shuffle_window=check_opt_int("shuffle_window", args["shuffle_window"]),
            prefetch=check_int("prefetch", args["prefetch"], INT32),
            with_sample_id=check_bool("with_sample_id", args["with_sample_id"]),
            fill_null=check_fill_null(args["fill_null"]),
            transforms=transforms,
            transform=check_callable("transform", args["transform"]),
            cache=CacheSettings.make(
                args["cache_dir"], args["cache_limit_bytes"], args["cache_decoded"],
                args["prefetch_bytes"],
            ),
            remote_timeout=DEFAULT_REMOTE_TIMEOUT if timeout is None else timeout,
            verify_page_checksums=check_bool(
                "verify_page_checksums", args["verify_page_checksums"]
            ),
            partitioning=partitioning,
            filter_arg=args["filter"],
            pin_memory=pin_memory,
            device=device,
            memory_limit=check_bytes("memory_limit", args["memory_limit"]),
        )  # fmt: skip
        if settings.shuffle == "global":
            if settings.shuffle_window is not None:
                raise InvalidArgumentError(
                    "shuffle='global' permutes every row of the dataset at once: leave "
                    f"shuffle_window unset (got {settings.shuffle_window})"
                )
            if not settings.cache.decoded:
                raise InvalidArgumentError(
                    "shuffle='global' gathers rows from the decoded tier: pass "
                    "cache_dir=<a node-local folder> and cache_decoded=True"
                )
        plan = settings.plan_options(0)
        if settings.shuffle_window is None:
            plan.window_row_groups = 1  # chosen later; the other settings checked now
        plan.validate()
        settings.engine_options(0).validate()
        return settings

    def plan_options(self, epoch: int) -> _core.PlanOptions:
        p = _core.PlanOptions()
        p.seed = self.seed
        p.epoch = epoch
        p.shuffle = self.shuffle is not False
        p.global_shuffle = self.shuffle == "global"
        # 0 (before resolve()): plan_memory's question for the default window.
        p.window_row_groups = 0 if self.shuffle_window is None else self.shuffle_window
        p.batch_size = self.batch_size
        p.world_size = self.world_size
        p.rank = self.rank
        p.drop_last = self.drop_last
        return p

    def output_options(self) -> _core.OutputOptions:
        o = _core.OutputOptions()
        o.all_columns = self.columns is None
        o.columns = list(self.columns or [])
        stacks = []
        for name, cols in self.stack.items():
            s = _core.StackSpec()
            s.name = name
            s.columns = cols
            stacks.append(s)
        o.stacks = stacks
        o.with_sample_id = self.with_sample_id
        if isinstance(self.fill_null, dict):
            o.fill_null_columns = self.fill_null
        else:
            o.fill_null = self.fill_null
        o.transforms = to_core(self.transforms)
        return o

    def engine_options(
        self,
        start_batch: int,
        offset: int = 0,
        stride: int = 1,
        threads: int | None = None,
        caches: Caches | None = None,
    ) -> _core.EngineOptions:
        e = _core.EngineOptions()
        if caches is not None:
            caches.apply(e, self.cache)
        e.output = self.output_options()
        e.num_threads = threads or self.num_threads
        e.queue_depth = self.prefetch
        e.prefetch_bytes = self.cache.prefetch_bytes
        e.memory_limit = self.memory_limit
        e.remote_timeout = self.remote_timeout
        e.verify_page_checksums = self.verify_page_checksums
        e.start_batch = start_batch
        e.batch_offset = offset
        e.batch_stride = stride
        e.trace = bool(self.extra.get("trace", False))
        e.debug_max_delay_us = int(self.extra.get("debug_max_delay_us", 0))
        e.debug_slow_stage = str(self.extra.get("debug_slow_stage", ""))
        e.debug_slow_us = int(self.extra.get("debug_slow_us", 0))
        return e

    def resolve(self, dataset: _core.Dataset) -> None:
        """Chooses the default shuffle window from memory_limit and the footers (a pure
        function of both, so the order is one too) and keeps what the engine is
        expected to hold (``memory_plan``)."""
        plan = _core.plan_memory(dataset, self.plan_options(0), self.engine_options(0))
        if self.shuffle_window is None:
            self.shuffle_window = int(plan["window_row_groups"])
        self.memory_plan = plan

    def stream_settings(self) -> dict[str, Any]:
        """The settings a state dict must match (JSON-serializable)."""
        return (
            {
                "columns": self.columns,
                "batch_size": self.batch_size,
                "shuffle": self.shuffle,
                "shuffle_window": self.shuffle_window,
                "rank": self.rank,
                "world_size": self.world_size,
                "drop_last": self.drop_last,
                "stack": self.stack,
                "with_sample_id": self.with_sample_id,
                "fill_null": self.fill_null,
                "transforms": [t.spec() for t in self.transforms],
            }
            | ({} if self.filter is None else {"filter": self.filter})
            | (
                # The global order's permutation: 2 since it is uniform (a table up to 2^16 rows,
                # six Feistel rounds past); a state saved under the first one is refused.
                {"permutation": 2} if self.shuffle == "global" else {}
            )
            | (
                # Windows count only row groups with rows since a filter's pruned ones
                # stopped thinning them: a state saved before, with a filter, is refused.
                {"windows": "of row groups with rows"}
                if self.shuffle is True and self.filter is not None
                else {}
            )
        )


def open_dataset(
    sources: list[str],
    partitioning: str | None = "hive",
    remote_timeout: float = DEFAULT_REMOTE_TIMEOUT,
    only_files: Sequence[str] = (),
) -> _core.Dataset:
    """The catalog; ``partitioning="hive"`` makes key=value folders columns;
    ``only_files`` (relative paths), when given, the files to keep of those listed."""
    paths = [str(Path(s)) if "://" not in s else s for s in sources]
    # The fixed folders of local globs (check_source): their keys are columns.
    bases = sources.bases if isinstance(sources, Sources) else []
    globs = sources.globs if isinstance(sources, Sources) else []
    key = (tuple(paths), tuple(bases), tuple(globs), partitioning or "", remote_timeout,
           tuple(only_files))  # fmt: skip
    opened = _OPENED.get()
    if opened is not None and key in opened:
        return opened[key]
    dataset = _core.Dataset(paths, partitioning=partitioning or "", remote_timeout=remote_timeout,
                            only_files=list(only_files), base_dirs=bases,
                            source_globs=globs)  # fmt: skip
    if opened is not None:
        opened[key] = dataset
    return dataset


# `shardfeed info` and `profile` open the catalog for their own use, then plan or run a
# Loader on the same sources: within `reusing_catalogs()` a catalog opened once (the same
# sources and settings) is handed out again, not every footer read again.
_OPENED: ContextVar[dict[tuple[Any, ...], _core.Dataset] | None] = ContextVar(
    "_OPENED", default=None
)


@contextmanager
def reusing_catalogs() -> Iterator[None]:
    """Within the block, a catalog is opened once per sources and settings (one
    command's several uses of one dataset; a Loader made later elsewhere opens its own)."""
    if _OPENED.get() is not None:  # within an outer block: its catalogs
        yield
        return
    token = _OPENED.set({})
    try:
        yield
    finally:
        _OPENED.reset(token)


def open_filtered(
    settings: Settings, image: bytes | None = None, only_files: Sequence[str] = ()
) -> tuple[_core.Dataset, dict[str, int]]:
    """The catalog restricted to the rows that pass ``filter=`` (sets
    ``settings.filter``, the canonical form), and the filter's counters."""
    dataset = open_dataset(
        settings.sources, settings.partitioning, settings.remote_timeout, only_files
    )
    if settings.filter_arg is None:
        # A Delta table's deletion vectors are a filter of their own (counts included).
        return dataset, dict(dataset.filter_counts())
    settings.filter = _filter.canonicalize(settings.filter_arg, dataset.schema())
    dataset = _filter.apply(
        dataset, settings.filter, settings.num_threads, settings.cache.dir, image
    )
    return dataset, dict(dataset.filter_counts())


@dataclass
class Caches:
    """The cache objects of one process (they hold locks and counters)."""

    tier: _core.DecodedTier | None = None
    files: _core.FileCache | None = None

    @classmethod
    def open(cls, cache: CacheSettings, dataset: _core.Dataset, remote_timeout: float) -> Caches:
        tier_dir, files_dir = cache.decoded_dir(), cache.files_dir()
        try:
            tier = (
                None if tier_dir is None else _core.open_decoded_tier(tier_dir, cache.limit_bytes)
            )
            # Local files are read in place: caching them would only copy them.
            if files_dir is None or dataset.is_local:
                return cls(tier=tier)
            try:
                files = _core.open_file_cache(files_dir, cache.limit_bytes, remote_timeout)
            except StorageError as e:
                if tier is None or not tier.read_only:
                    raise
                # A decoded tier warmed elsewhere and mounted read-only: its entries
                # serve, and the row groups it lacks are read from the source.
                warnings.warn(
                    f"cache_dir {cache.dir!r} is read-only: the decoded tier's entries are "
                    f"read from it, and remote files are read without the file cache ({e})",
                    stacklevel=4,
                )
                files = None
            return cls(tier=tier, files=files)
        except StorageError as e:
            # Named by the setting (it named a lock file inside it): a read-only or
            # unwritable folder cannot hold the caches' lock files and entries.
            raise StorageError(
                f"cache_dir {cache.dir!r} cannot be used ({e}): the caches write lock files "
                "and entries there; give a writable folder, or cache_dir=None"
            ) from e

    def apply(self, options: _core.EngineOptions, cache: CacheSettings) -> None:
        if self.tier is not None:
            options.decoded_tier = self.tier
        if self.files is not None:
            options.file_cache = self.files
            options.prefetch_bytes = cache.prefetch_bytes

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "remote_bytes": 0,
            "cache_hits": 0,
            "cache_misses": 0,
            "cache_bytes": 0,
            "evictions": 0,
            "uncached_reads": 0,
            "fetch_seconds": 0.0,
            "prefetch_wait_seconds": 0.0,
        }  # the file cache's keys, also where there is none (local data)
        if self.files is not None:
            out.update(self.files.stats())
        if self.tier is not None:
            out.update(self.tier.stats())
        return out
