"""pin_memory and device: the error paths on a machine without CUDA, and the arena
the batch buffers come from (here with ordinary memory standing in for pinned)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import shardfeed
import torch
from shardfeed import _core, _device, _loader

from .conftest import digest, to_numpy

FEATS = [f"f{i}" for i in range(8)]


def loader(dataset, **kw):
    kw.setdefault("batch_size", 64)
    return shardfeed.Loader(
        dataset, stack={"feats": FEATS}, columns=["label", "seq"], with_sample_id=True, **kw
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only error paths")
def test_without_cuda_the_settings_are_refused_by_name(dataset):
    with pytest.raises(ValueError, match=r"pin_memory=True: .*torch.cuda.is_available\(\)"):
        loader(dataset, pin_memory=True)
    with pytest.raises(ValueError, match=r"device='cuda': .*CUDA"):
        loader(dataset, device="cuda")
    with pytest.raises(ValueError, match=r"device='cuda:1'"):
        loader(dataset, device="cuda:1")
    with pytest.raises(ValueError, match=r"device='cuda:1'"):
        loader(dataset, device=torch.device("cuda", 1))


def test_settings_are_checked_before_anything_is_opened(dataset, tmp_path):
    missing = tmp_path / "nothing-here"
    with pytest.raises(ValueError, match="needs output='torch'"):
        loader(missing, device="cuda", output="numpy")
    with pytest.raises(ValueError, match="device must be 'cpu' or a CUDA device"):
        loader(missing, device="tpu")
    with pytest.raises(TypeError, match="pin_memory"):
        loader(missing, pin_memory="yes")
    with pytest.raises(TypeError, match="device"):
        loader(missing, device=0)
    # device="cpu" is no device: the same stream, in host memory; a torch.device too.
    assert digest(loader(dataset, device="cpu")) == digest(loader(dataset))
    assert digest(loader(dataset, device=torch.device("cpu"))) == digest(loader(dataset))
    # So with any output: every output is in host memory.
    as_numpy = digest(loader(dataset, output="numpy"))
    assert digest(loader(dataset, device="cpu", output="numpy")) == as_numpy
    with pytest.raises(ValueError, match=r"^pin_memory=True needs output='torch'"):
        loader(dataset, device="cpu", pin_memory=True, output="numpy")


@pytest.fixture
def fake_pinned(monkeypatch):
    """CUDA 'available', slabs from NumPy: what the arena does, without a GPU."""
    slabs: list[np.ndarray] = []

    def slab(size: int) -> tuple[int, object]:
        memory = np.empty(size, np.uint8)
        slabs.append(memory)
        return int(memory.ctypes.data), memory

    monkeypatch.setattr(_device, "_cuda_available", lambda: True)
    monkeypatch.setattr(_device, "_pinned_slab", slab)
    return slabs


def test_batches_are_built_in_the_arena_and_the_stream_is_unchanged(dataset, fake_pinned):
    plain = loader(dataset, num_threads=2)
    pinned = loader(dataset, num_threads=2, pin_memory=True)
    arena = pinned._arena
    assert arena is not None and len(fake_pinned) == 1
    for epoch in (0, 1):
        plain.set_epoch(epoch)
        pinned.set_epoch(epoch)
        batches = list(pinned)
        for batch in batches:
            for value in batch.values():
                assert arena.core.contains(value.data_ptr())
        assert digest(batches) == digest(plain)
    stats = pinned.stats()["pinned"]
    assert stats["misses"] == 0 and stats["allocations"] > 0
    assert stats["peak_bytes"] <= stats["bytes"]


def test_a_full_arena_grows_and_nothing_is_lost(dataset, fake_pinned, monkeypatch):
    monkeypatch.setattr(_loader, "batch_bytes", lambda outputs, batch_size: 1)
    monkeypatch.setattr(_device, "MIN_SLAB", 4096)  # 4 KiB first, 16 KiB at most
    base = _core.live_buffers()
    plain = list(loader(dataset, batch_size=256, drop_last=False))
    pinned = loader(dataset, batch_size=256, drop_last=False, pin_memory=True)
    held = list(pinned)  # every batch of the epoch held at once: more than the arena
    assert digest(held) == digest(plain)
    stats = pinned.stats()["pinned"]
    assert stats["misses"] > 0  # those came from the pool ...
    assert stats["slabs"] > 1 and 12 << 10 < stats["bytes"] <= 16 << 10  # ... and it grew
    ids = np.concatenate([to_numpy(b["sample_id"]) for b in held])
    assert np.array_equal(np.sort(ids), np.arange(pinned.num_rows))
    del held, plain, pinned
    gc.collect()
    assert _core.live_buffers() == base


def test_the_next_pass_starts_early_with_pinned_batches_too(dataset, fake_pinned):
    """Both engines take their buffers from the one arena (a training step on a GPU is
    when the CPUs have room for the next epoch's decode); each pass is its epoch's
    stream, with every batch in the arena."""
    import time

    pinned = loader(dataset, num_threads=2, pin_memory=True)
    pinned._settings.extra["start_early"] = True  # whatever the CPUs are doing
    for epoch in (0, 1, 2):
        plain = loader(dataset, num_threads=2)
        plain.set_epoch(epoch)
        pinned.set_epoch(epoch)
        batches = [b for b in pinned if time.sleep(0.0005) is None]  # a step
        assert digest(batches) == digest(plain), epoch
        assert pinned.stats()["started_early"] == (epoch > 0)
        # The first slab (1 MiB at least) holds both engines' batches of this dataset.
        assert all(pinned._arena.core.contains(b["feats"].data_ptr()) for b in batches)
        assert pinned.stats()["pinned"]["misses"] == 0


def test_torch_dataset_points_to_the_dataloader(dataset, fake_pinned):
    with pytest.raises(ValueError, match="DataLoader"):
        shardfeed.TorchDataset(dataset, columns=["label"], pin_memory=True)


def test_a_device_this_process_does_not_see_is_refused_by_name(dataset, monkeypatch):
    """cuda:N past the visible devices fails at construction, naming the setting, not
    with 'invalid device ordinal' at the first batch's copy."""
    monkeypatch.setattr(_device, "_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(
        ValueError, match=r"device='cuda:2': .* sees 2 CUDA device\(s\), numbered 0 to 1"
    ):
        loader(dataset, device="cuda:2")
