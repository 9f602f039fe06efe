"""pin_memory and device on a real GPU: page-locked batches, batches on the device, the
same stream as in host memory, and buffers that are not reused while a copy reads them.

Runs only where torch sees CUDA (the project's CI has no GPU; the CPU error paths and
the arena are in ``test_pinned.py``).  Run on a GPU machine with
``python -m pytest tests/test_cuda.py``."""

from __future__ import annotations

import gc

import pytest
import shardfeed
import torch
from shardfeed import _core

from .conftest import digest

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

FEATS = [f"f{i}" for i in range(8)]


def loader(dataset, **kw):
    kw.setdefault("batch_size", 64)
    kw.setdefault("num_threads", 2)
    return shardfeed.Loader(
        dataset, stack={"feats": FEATS}, columns=["label", "seq"], with_sample_id=True, **kw
    )


def on_host(batches):
    return [{k: v.cpu() for k, v in b.items()} for b in batches]


def test_pinned_batches_are_page_locked_and_the_stream_is_unchanged(dataset):
    plain = loader(dataset)
    pinned = loader(dataset, pin_memory=True)
    pinned._settings.extra["start_early"] = True
    for epoch in (0, 1, 2):
        plain.set_epoch(epoch)
        pinned.set_epoch(epoch)
        batches = list(pinned)  # all held at once: none may be reused under another
        assert all(v.is_pinned() for b in batches for v in b.values())
        assert digest(batches) == digest(plain), epoch
    assert pinned.stats()["started_early"]


def test_device_batches_are_on_the_gpu_and_equal_the_host_stream(dataset):
    plain = loader(dataset)
    device = loader(dataset, device="cuda")
    device._settings.extra["start_early"] = True
    for epoch in (0, 1, 2):
        plain.set_epoch(epoch)
        device.set_epoch(epoch)
        batches = list(device)
        assert batches and all(
            v.device == torch.device("cuda", 0) for b in batches for v in b.values()
        )
        assert digest(on_host(batches)) == digest(plain), epoch


def test_work_on_the_consumers_own_stream_sees_the_copied_values(dataset):
    """The consumer's current stream waits for each batch's copy: work queued at once
    on a non-default stream reads the copied values, not what was there before."""
    plain = [b["feats"] for b in loader(dataset)]
    stream = torch.cuda.Stream()
    doubled = []
    with torch.cuda.stream(stream):
        for batch in loader(dataset, device="cuda"):
            doubled.append(batch["feats"] * 2)  # queued on `stream` before any sync
    stream.synchronize()
    assert len(doubled) == len(plain)
    for got, want in zip(doubled, plain, strict=True):
        assert torch.equal(got.cpu(), want * 2)


def test_breaking_off_mid_epoch_then_going_on_and_resuming(dataset):
    plain = list(loader(dataset))
    device = loader(dataset, device="cuda")
    for i, _ in enumerate(device):  # a copy is in flight when the loop breaks off
        if i == 2:
            break
    assert digest(on_host(device)) == digest(plain)  # a new pass: the whole epoch
    state = None
    for i, _ in enumerate(device):
        if i == 4:
            state = device.state_dict()
            break
    resumed = loader(dataset, device="cuda")
    resumed.load_state_dict(state)
    assert digest(on_host(resumed)) == digest(plain[5:])


def test_memory_is_given_back_with_the_loader(dataset):
    base = _core.live_buffers()
    for kw in ({"pin_memory": True}, {"device": "cuda"}):
        one = loader(dataset, **kw)
        held = list(one)
        assert held
        del one, held
        gc.collect()
        assert _core.live_buffers() == base, kw


def test_a_device_past_the_visible_ones_is_refused_by_name(dataset):
    count = torch.cuda.device_count()
    with pytest.raises(ValueError, match=rf"device='cuda:{count}': .* sees {count} CUDA"):
        loader(dataset, device=f"cuda:{count}")
    batches = list(loader(dataset, device="cuda:0"))
    assert batches[0]["feats"].device == torch.device("cuda", 0)
