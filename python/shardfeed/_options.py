"""Argument checking and conversion shared by Loader and TorchDataset (private)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import _core
from ._errors import InvalidArgumentError
from .transforms import Transform, to_core

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
StackArg = Mapping[str, Sequence[str]]

_OUTPUTS = ("torch", "numpy")
_PARTITIONINGS = ("hive", None)


def _source_list(source: Source) -> list[str]:
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    items = [os.fspath(s) for s in source]
    if not items:
        raise InvalidArgumentError("source is an empty list")
    return items


def _resolve_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """rank/world_size: given, else torch.distributed, else RANK/WORLD_SIZE, else 0/1."""
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    dist_rank = dist_world = None
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist_rank, dist_world = dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    if dist_rank is None:
        env_rank, env_world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        dist_rank = int(env_rank) if env_rank is not None else 0
        dist_world = int(env_world) if env_world is not None else 1
    assert dist_world is not None
    return (
        int(rank) if rank is not None else dist_rank,
        int(world_size) if world_size is not None else dist_world,
    )


def default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, 16))


@dataclass(frozen=True)
class CacheSettings:
    """Where and how much to cache (see Loader's cache_* arguments)."""

    dir: str | None = None
    limit_bytes: int = 0  # 0: unlimited
    decoded: bool = False
    prefetch_bytes: int = 256 << 20

    @classmethod
    def make(
        cls,
        cache_dir: str | os.PathLike[str] | None,
        cache_limit_bytes: int | None,
        cache_decoded: bool,
        prefetch_bytes: int | None,
    ) -> CacheSettings:
        if cache_decoded and cache_dir is None:
            raise InvalidArgumentError("cache_decoded=True needs a cache_dir")
        limit = 0 if cache_limit_bytes is None else int(cache_limit_bytes)
        if limit < 0:
            raise InvalidArgumentError(f"cache_limit_bytes must be >= 0, got {limit}")
        ahead = cls.prefetch_bytes if prefetch_bytes is None else int(prefetch_bytes)
        if ahead < 0:
            raise InvalidArgumentError(f"prefetch_bytes must be >= 0, got {ahead}")
        return cls(
            dir=None if cache_dir is None else os.fspath(cache_dir),
            limit_bytes=limit,
            decoded=bool(cache_decoded),
            prefetch_bytes=ahead,
        )

    def decoded_dir(self) -> str | None:
        return os.path.join(self.dir, "decoded") if self.dir and self.decoded else None

    def files_dir(self) -> str | None:
        return os.path.join(self.dir, "files") if self.dir else None


@dataclass
class Settings:
    """Everything that decides the stream, checked once."""

    sources: list[str]
    columns: list[str] | None
    batch_size: int
    shuffle: bool
    seed: int
    rank: int
    world_size: int
    drop_last: bool
    num_threads: int
    stack: dict[str, list[str]]
    output: str
    shuffle_window: int
    prefetch: int
    with_sample_id: bool
    fill_null: float | None
    transforms: list[Transform]
    transform: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None
    cache: CacheSettings
    partitioning: str | None = "hive"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        source: Source,
        columns: Sequence[str] | None,
        batch_size: int,
        shuffle: bool,
        seed: int,
        rank: int | None,
        world_size: int | None,
        drop_last: bool,
        num_threads: int | None,
        stack: StackArg | None,
        output: str,
        shuffle_window: int,
        prefetch: int,
        with_sample_id: bool,
        fill_null: float | None,
        transforms: Sequence[Transform] | None = None,
        transform: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None = None,
        cache: CacheSettings | None = None,
        partitioning: str | None = "hive",
    ) -> Settings:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if output not in _OUTPUTS:
            raise InvalidArgumentError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if isinstance(columns, str):
            raise InvalidArgumentError("columns must be a list of names, not a string")
        if not isinstance(seed, int) or seed < 0 or seed >= 2**64:
            raise InvalidArgumentError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        if shuffle_window < 1:
            raise InvalidArgumentError(f"shuffle_window must be >= 1, got {shuffle_window}")
        if prefetch < 1:
            raise InvalidArgumentError(f"prefetch must be >= 1, got {prefetch}")
        if partitioning not in _PARTITIONINGS:
            raise InvalidArgumentError(
                f"partitioning must be one of {_PARTITIONINGS}, got {partitioning!r}"
            )
        if transform is not None and not callable(transform):
            raise InvalidArgumentError(f"transform must be callable, got {transform!r}")
        transform_list = list(transforms or [])
        to_core(transform_list)  # settings errors before anything is opened
        r, w = _resolve_world(rank, world_size)
        if w < 1 or not 0 <= r < w:
            raise InvalidArgumentError(f"rank must be in [0, world_size): rank={r}, world_size={w}")
        threads = default_threads() if num_threads is None else int(num_threads)
        if threads < 1:
            raise InvalidArgumentError(f"num_threads must be >= 1, got {num_threads}")
        stacks: dict[str, list[str]] = {}
        for name, cols in (stack or {}).items():
            if isinstance(cols, str):
                raise InvalidArgumentError(f"stack[{name!r}] must be a list of column names")
            stacks[str(name)] = [str(c) for c in cols]
        return cls(
            sources=_source_list(source),
            columns=None if columns is None else [str(c) for c in columns],
            batch_size=batch_size,
            shuffle=bool(shuffle),
            seed=seed,
            rank=r,
            world_size=w,
            drop_last=bool(drop_last),
            num_threads=threads,
            stack=stacks,
            output=output,
            shuffle_window=int(shuffle_window),
            prefetch=int(prefetch),
            with_sample_id=bool(with_sample_id),
            fill_null=None if fill_null is None else float(fill_null),
            transforms=transform_list,
            transform=transform,
            cache=cache or CacheSettings(),
            partitioning=partitioning,
        )

    def plan_options(self, epoch: int) -> _core.PlanOptions:
        p = _core.PlanOptions()
        p.seed = self.seed
        p.epoch = epoch
        p.shuffle = self.shuffle
        p.window_row_groups = self.shuffle_window
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
        e.start_batch = start_batch
        e.batch_offset = offset
        e.batch_stride = stride
        e.trace = bool(self.extra.get("trace", False))
        e.debug_max_delay_us = int(self.extra.get("debug_max_delay_us", 0))
        e.debug_slow_stage = str(self.extra.get("debug_slow_stage", ""))
        e.debug_slow_us = int(self.extra.get("debug_slow_us", 0))
        return e

    def stream_settings(self) -> dict[str, Any]:
        """The settings a state dict must match (JSON-serializable)."""
        return {
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


def open_dataset(sources: list[str], partitioning: str | None = "hive") -> _core.Dataset:
    """The catalog; ``partitioning="hive"`` makes key=value folders columns."""
    paths = [str(Path(s)) if "://" not in s else s for s in sources]
    return _core.Dataset(paths, 8, partitioning or "")


@dataclass
class Caches:
    """The cache objects of one process (they hold locks and counters)."""

    tier: _core.DecodedTier | None = None
    files: _core.FileCache | None = None

    @classmethod
    def open(cls, cache: CacheSettings, dataset: _core.Dataset) -> Caches:
        tier_dir, files_dir = cache.decoded_dir(), cache.files_dir()
        return cls(
            tier=None if tier_dir is None else _core.open_decoded_tier(tier_dir, cache.limit_bytes),
            # Local files are read in place: caching them would only copy them.
            files=None
            if files_dir is None or dataset.is_local
            else _core.open_file_cache(files_dir, cache.limit_bytes),
        )

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
            "prefetch_wait_seconds": 0.0,
        }
        if self.files is not None:
            out.update(self.files.stats())
        if self.tier is not None:
            out.update(self.tier.stats())
        return out
