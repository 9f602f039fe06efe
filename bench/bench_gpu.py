"""GPU feeding benchmark (issue 12, item 5): pinned batch buffers, and the copy one batch ahead.

Needs CUDA (``--smoke`` runs the ``pageable`` system on the CPU to check the script).
The tabular dataset of ``_common`` (``--rows`` x 256 float32 + label) is read into
``x = [4096, 256]`` batches that train a small MLP (256 -> ``--hidden`` -> ``--hidden`` ->
1, fp32, Adam, BCE on ``label % 2``) on the GPU.  Systems, one after the other in one
process (the GPU is shared, so one at a time), each ``--warmup`` + ``--steps`` steps:

* ``pageable``: ``Loader(output="torch")``, ``x.to("cuda")`` in the loop (what a loader
  without pinned memory gives);
* ``pin_in_loop``: ``Loader``, ``x.pin_memory().to("cuda", non_blocking=True)``: the extra
  host copy a user writes today to get an asynchronous copy;
* ``pinned``: ``Loader(pin_memory=True)``, ``x.to("cuda", non_blocking=True)``;
* ``device``: ``Loader(device="cuda")``: the engine's pinned buffers copied on a side stream
  one batch ahead (the reference).

Per system: samples/s of training; ``gpu_busy_share``: the summed CUDA-event time of each
step's forward, backward and optimizer step over the wall time (how busy the loop keeps the
GPU); ``wait_share``: the share of wall time spent in ``next()`` and the host-side copy call;
``h2d_gbps``: one batch's host-to-device copy alone, timed with CUDA events; and whether
the host batch was page-locked.  Results: ``bench/results/gpu.json`` (``_common``'s format).

Usage::

    python3 bench/bench_gpu.py [--rows 500000] [--steps 300] [--hidden 2048]
    python3 bench/bench_gpu.py --smoke     # CPU: the pageable system only, tiny
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _common as common

SYSTEMS = ("pageable", "pin_in_loop", "pinned", "device")
REFERENCE = "device"


def endless(loader: Any) -> Iterator[dict[str, Any]]:
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def make_model(features: int, hidden: int, device: Any) -> tuple[Any, Any, Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, 1),
    ).to(device)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3), torch.nn.BCEWithLogitsLoss()


def host_copy(system: str, device: Any) -> Callable[[Any], Any]:
    if system == "pageable":
        return lambda t: t.to(device)
    if system == "pin_in_loop":
        return lambda t: t.pin_memory().to(device, non_blocking=True)
    if system == "pinned":
        return lambda t: t.to(device, non_blocking=True)
    return lambda t: t  # device: already there


def loader_for(system: str, path: str, args: argparse.Namespace, features: list[str]) -> Any:
    import shardfeed

    kw: dict[str, Any] = {}
    if system == "pinned":
        kw["pin_memory"] = True
    elif system == "device":
        kw["device"] = "cuda"
    if args.threads is not None:
        kw["num_threads"] = args.threads
    if args.memory_limit is not None:
        kw["memory_limit"] = None if args.memory_limit.lower() == "none" else args.memory_limit
    return shardfeed.Loader(
        path,
        stack={"x": features},
        columns=["label"],
        batch_size=args.batch_size,
        shuffle=True,
        seed=0,
        output="torch",
        **kw,
    )


def h2d_gbps(loader: Any, device: Any) -> tuple[float, bool]:
    """One batch's copy alone (after one warm-up copy), and whether it was pinned."""
    import torch

    batch = next(iter(loader))
    x = batch["x"]
    if x.is_cuda:  # device=: time a copy of the pinned host buffer it came from
        return float("nan"), True
    x.to(device, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    x.to(device, non_blocking=True)
    end.record()
    torch.cuda.synchronize()
    return x.numel() * x.element_size() / (start.elapsed_time(end) / 1e3) / 1e9, bool(x.is_pinned())


def check_batches(path: str, args: argparse.Namespace, features: list[str]) -> dict[str, Any]:
    """On the GPU: pinned batches are page-locked, device batches are on the GPU, and both
    equal the pageable stream batch for batch (one epoch, the three loaders in step)."""
    import torch

    loaders = [loader_for(s, path, args, features) for s in ("pageable", "pinned", "device")]
    batches = pinned = on_cuda = equal = 0
    for plain, pin, dev in zip(*loaders, strict=True):
        batches += 1
        pinned += all(v.is_pinned() for v in pin.values())
        on_cuda += all(v.is_cuda for v in dev.values())
        equal += all(
            torch.equal(plain[k], pin[k]) and torch.equal(plain[k], dev[k].cpu()) for k in plain
        )
    return {
        "batches": batches,
        "pinned_page_locked": pinned,
        "device_on_cuda": on_cuda,
        "equal_to_pageable": equal,
        "arena": loaders[1].stats().get("pinned"),
    }


def run_system(system: str, path: str, args: argparse.Namespace, features: list[str]) -> dict:
    import torch

    cuda = not args.smoke
    device = torch.device("cuda" if cuda else "cpu")
    loader = loader_for(system, path, args, features)
    gbps, pinned = h2d_gbps(loader, device) if cuda else (float("nan"), False)
    model, opt, loss_fn = make_model(len(features), args.hidden, device)
    copy = host_copy(system, device)
    events: list[tuple[Any, Any]] = []
    it = endless(loader)
    wait = 0.0
    t_start = time.perf_counter()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if cuda:
                torch.cuda.synchronize()
            events.clear()
            wait = 0.0
            t_start = time.perf_counter()
        t0 = time.perf_counter()
        batch = next(it)
        x, y = copy(batch["x"]), copy(batch["label"])
        wait += time.perf_counter() - t0
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).squeeze(1), (y % 2).float())
        loss.backward()
        opt.step()
        if cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            events.append((start, end))
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t_start
    busy = sum(s.elapsed_time(e) for s, e in events) / 1e3 if cuda else float("nan")
    samples = args.steps * args.batch_size
    extra = {
        "gpu_busy_share": round(busy / wall, 4) if cuda else None,
        "wait_share": round(wait / wall, 4),
        "step_ms": round(wall / args.steps * 1e3, 3),
        "h2d_gbps": None if gbps != gbps else round(gbps, 2),
        "host_batch_pinned": pinned,
        "final_loss": float(loss.detach().cpu()),
        "pinned_arena": loader.stats().get("pinned"),
    }
    return {
        "system": system,
        "rows_per_second_median": samples / wall,
        "seconds_median": wall,
        "rows_per_run": samples,
        "runs": [{"rows": samples, "seconds": wall, "rows_per_second": samples / wall}],
        "extra": extra,
        "notes": __doc__.split(f"``{system}``: ", 1)[1].split("\n*", 1)[0].strip()
        if f"``{system}``: " in (__doc__ or "")
        else "",
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--threads", type=int, default=None, help="num_threads (default: the Loader's)")
    p.add_argument(
        "--memory-limit", default=None, help="memory_limit: 1GiB, none, ... (default: the Loader's)"
    )
    p.add_argument("--data-root", type=Path, default=common.DATA_DIR)
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "gpu.json")
    p.add_argument("--smoke", action="store_true", help="CPU, pageable only, tiny")
    args = p.parse_args(argv)
    if args.smoke:
        args.rows, args.steps, args.warmup, args.hidden = 40_000, 5, 1, 64
        args.systems = "pageable"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = common.TabularSpec(rows=args.rows, files=args.files)
    dataset = common.ensure_tabular_dataset(spec, root=args.data_root)
    common.warm_page_cache(common.dataset_files(dataset))
    notes = []
    if not args.smoke:
        checks = check_batches(dataset["path"], args, spec.feature_names)
        print(f"checks: {checks}", flush=True)
        notes.append(f"checks: {checks}")
    results = []
    for system in [s.strip() for s in args.systems.split(",") if s.strip()]:
        result = run_system(system, dataset["path"], args, spec.feature_names)
        e = result["extra"]
        print(
            f"{system:12s} {result['rows_per_second_median']:>12,.0f} samples/s  "
            f"step {e['step_ms']:7.2f} ms  gpu busy {e['gpu_busy_share']}  "
            f"wait {e['wait_share']:.3f}  h2d {e['h2d_gbps']} GB/s  "
            f"pinned {e['host_batch_pinned']}",
            flush=True,
        )
        results.append(result)
    reference = REFERENCE if any(r["system"] == REFERENCE for r in results) else None
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    out, doc = common.write_results(
        "gpu", dataset, config, results, reference=reference, notes=notes, path=args.output
    )
    print(f"ratios: {doc['ratios']}\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
