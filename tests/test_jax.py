"""output="jax": the Loader's stream as jax.Arrays, zero-copy on the CPU device.

Each check runs in a process of its own: JAX starts threads when imported, and the
DataLoader tests of this session fork (JAX warns that a fork can then deadlock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import shardfeed

from .conftest import digest

pytest.importorskip("jax")  # installed by scripts/setup.sh; a plain `pip install` may lack it

_CHECK = r"""
import gc, hashlib, json, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", sys.argv[2] == "x64")
import shardfeed
from shardfeed import _core
from shardfeed._loader import convert

source = sys.argv[1]
kw = dict(batch_size=64, with_sample_id=True, stack={"v": [f"f{i}" for i in range(8)]},
          columns=["id", "x", "seq", "label"], fill_null=0)
h = hashlib.sha256()
types = set()
for batch in shardfeed.Loader(source, output="jax", **kw):
    for name in sorted(batch):
        value = batch[name]
        types.add("jax.Array" if isinstance(value, jax.Array) else type(value).__name__)
        a = np.ascontiguousarray(np.asarray(value))
        h.update(f"{name}:{a.dtype}:{a.shape};".encode())
        h.update(a.tobytes())
    h.update(b"|")

# Zero-copy: the jax array aliases the engine's buffer, which lives as long as it does.
loader = shardfeed.Loader(source, output="numpy", **kw)
batch = next(iter(loader))
before = _core.live_buffers()
arrays = convert(batch, "jax")
aliased = {k: arrays[k].unsafe_buffer_pointer() == batch[k].ctypes.data for k in arrays}
dtypes = {k: str(arrays[k].dtype) for k in arrays}
del batch, loader
gc.collect()
held = _core.live_buffers()
del arrays
gc.collect()
print(json.dumps({"digest": h.hexdigest(), "types": sorted(types), "aliased": aliased,
                  "dtypes": dtypes, "held": held, "freed": _core.live_buffers(),
                  "before": before}))
"""


def _run(dataset: Path, mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHECK, str(dataset), mode],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_jax_output_is_the_numpy_stream_without_copies(dataset):
    kw = dict(batch_size=64, with_sample_id=True, stack={"v": [f"f{i}" for i in range(8)]},
              columns=["id", "x", "seq", "label"], fill_null=0)  # fmt: skip
    reference = digest(shardfeed.Loader(dataset, output="numpy", **kw))
    out = _run(dataset, "x64")
    assert out["types"] == ["jax.Array"]
    assert out["digest"] == reference
    # Every output aliases its engine buffer (64-bit ones too, with x64 on).
    assert all(out["aliased"].values()), out["aliased"]
    assert out["dtypes"]["sample_id"] == "int64"
    # The buffers stay alive while the arrays do, and are freed with them.
    assert out["held"] >= len(out["aliased"]) > 0
    assert out["freed"] < out["held"]


def test_jax_output_follows_jax_default_32_bits(dataset):
    out = _run(dataset, "x32")
    assert out["types"] == ["jax.Array"]
    assert out["dtypes"]["sample_id"] == "int32"  # JAX's own narrowing, a copy
    assert out["aliased"]["sample_id"] is False
    assert out["aliased"]["v"] is True  # float32: still the engine's buffer


def test_jax_output_is_a_loader_setting(dataset):
    with pytest.raises(shardfeed.InvalidArgumentError, match="output must be 'torch' or"):
        shardfeed.TorchDataset(dataset, output="jax")
    with pytest.raises(shardfeed.InvalidArgumentError, match="needs output='torch'"):
        shardfeed.Loader(dataset, output="jax", pin_memory=True)


_WIDE = r"""
import sys
import jax
jax.config.update("jax_enable_x64", sys.argv[2] == "x64")
import shardfeed
batches = []
try:
    for batch in shardfeed.Loader(sys.argv[1], batch_size=2, shuffle=False, output="jax"):
        batches.append({k: v.tolist() for k, v in batch.items()})
except shardfeed.UnsupportedTypeError as e:
    print("refused after", len(batches), "batches:", batches, e)
else:
    print("read", batches)
"""


@pytest.mark.parametrize("mode", ["x32", "x64"])
def test_integers_that_32_bits_cannot_hold_are_refused_not_wrapped(tmp_path, mode):
    """With x64 off, JAX made int64 2**40 into int32 0, silently; now the batch that
    holds it is refused, naming the output and the value, after the batches before it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = [1, -(2**31), 2**31 - 1, 2**40, 5, 6]
    pq.write_table(pa.table({"id": pa.array(values, pa.int64())}), tmp_path / "t.parquet")
    proc = subprocess.run([sys.executable, "-c", _WIDE, str(tmp_path), mode],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.strip().splitlines()[-1]
    if mode == "x64":
        assert (
            out == "read [{'id': [1, -2147483648]}, {'id': [2147483647, 1099511627776]}, "
            "{'id': [5, 6]}]"
        )
    else:
        assert out.startswith("refused after 1 batches: [{'id': [1, -2147483648]}]")
        assert "output 'id' holds 1099511627776, which JAX with jax_enable_x64 off" in out
