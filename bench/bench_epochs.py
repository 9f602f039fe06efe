"""Epoch boundaries: the consumer's wait per epoch with the next pass's engine started early
(the Loader's default) and without it.

Each run is a fresh process that reads ``--epochs`` epochs (``set_epoch`` before each) of a
small tabular dataset whose window at the default memory limit is nearly all of it (150,000
rows x 256 float32 in 30 row groups of 5,000: a window of 28), so each pass's first batch
waits for almost the whole dataset's decode unless that decode ran during the pass before.
After each batch the consumer runs a step of ``--step-ms``: ``sleep`` (a training step on an
accelerator: the CPUs are free) or ``busy`` (a step on the CPU, one core busy), under which
the Loader does not start early. Reported per system, over the epochs after the first of
every run: the median share of an epoch's time spent waiting for data, the median wait for
the first batch, the median rows/s, how many passes started early, and the peak RSS above
the RSS after imports (VmHWM, in the process itself).

Systems: ``early_<step>`` (default settings) and ``plain_<step>`` (early start turned off),
runs alternating; with ``torch_2w_`` before the name, a ``TorchDataset`` in a DataLoader with 2
persistent workers (worker 0 runs the engine; a worker starts the next pass early from its
second pass on, so the second epoch of each run is never early there; RSS: the main process's
peak or the largest worker's, above the main process's RSS after imports).
``--dataset large`` reads the suite's dataset instead (1,100,000 rows in 16 row groups of 70
MB, ``[4096, 256]`` batches): a window of 2 at the default limit, which the window being read
and the next one nearly fill, so the next pass's engine decodes only into the room the current
one leaves.
Results: ``bench/results/epochs.json`` (``epochs_large.json``; ``_common``'s format) and a table.

Usage::

    python3 bench/bench_epochs.py [--repeats 3] [--epochs 6] [--step-ms 1.0] [--steps sleep,busy]
        [--readers loader,torch_2w] [--dataset small|large] [--batch-size N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import _common as common

_CHILD = r"""
import gc, json, resource, sys, time
import shardfeed
path, early, step_kind = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
step_ms, epochs, reader = float(sys.argv[4]) / 1e3, int(sys.argv[5]), sys.argv[6]
batch_size = int(sys.argv[7])
def status_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
kw = dict(batch_size=batch_size, stack={"x": [f"f{i:03d}" for i in range(256)]}, columns=["label"])
if reader == "loader":
    loader = shardfeed.Loader(path, output="numpy", **kw)
    source = loader
else:  # torch_2w: TorchDataset in a DataLoader with 2 persistent workers
    import torch
    loader = shardfeed.TorchDataset(path, **kw)
    source = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2,
                                         persistent_workers=True)
if not early:
    loader._settings.extra["start_early"] = False
base = status_mb("VmRSS:")
out = []
for epoch in range(epochs):
    loader.set_epoch(epoch)
    it = iter(source)
    wait = first = 0.0
    rows = 0
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        batch = next(it, None)
        dt = time.perf_counter() - t0
        wait += dt
        if batch is None:
            break
        if rows == 0:
            first = dt
        rows += len(batch["label"])
        if step_kind == "sleep":
            time.sleep(step_ms)
        else:
            t1 = time.perf_counter()
            while time.perf_counter() - t1 < step_ms:
                pass
    seconds = time.perf_counter() - start
    started = bool(loader.stats()["started_early"]) if reader == "loader" else None
    out.append({"rows": rows, "seconds": seconds, "wait": wait / seconds, "first": first,
                "started_early": started})
rss = status_mb("VmHWM:") - base
if reader != "loader":  # the largest worker's peak (worker 0's: it runs the engine)
    del it, source
    gc.collect()
    time.sleep(0.5)
    rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 - base)
print(json.dumps({"epochs": out, "rss_above_mb": rss}))
"""


# name -> (dataset, default batch size)
_DATASETS = {
    # A window of nearly all of it at the default limit.
    "small": (common.TabularSpec(rows=150_000, files=6, row_group_rows=5_000), 1024),
    # The suite's: 70 MB row groups, a window of 2 at the default limit, which is then nearly
    # all taken by the window being read and the next one.
    "large": (common.TabularSpec(), 4096),
}


def _describe(path: str, spec: common.TabularSpec, batch_size: int) -> str:
    """The dataset and the window the default limit gives it (from the footers)."""
    import shardfeed

    plan = shardfeed.Loader(path, batch_size=batch_size, shuffle=True)._settings.memory_plan or {}
    groups = spec.rows // spec.row_group_rows
    return (
        f"{spec.rows:,} rows x {spec.features} float32 in {groups} row groups of "
        f"{spec.row_group_rows:,} (a window of {plan.get('window_row_groups')} at the default "
        f"limit), `[{batch_size}, {spec.features}]` batches"
    )


def run(path: str, early: bool, step: str, reader: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-c", _CHILD, path, "1" if early else "0", step,
           str(args.step_ms), str(args.epochs), reader, str(args.batch_size)]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.timeout)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--step-ms", type=float, default=1.0)
    p.add_argument("--steps", default="sleep,busy")
    p.add_argument("--readers", default="loader,torch_2w")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--dataset", choices=sorted(_DATASETS), default="small")
    p.add_argument("--batch-size", type=int, default=None, help="default: 1024 small, 4096 large")
    p.add_argument("--output", type=Path, default=None, help="default: results/epochs[_large].json")
    args = p.parse_args(argv)
    spec, default_batch = _DATASETS[args.dataset]
    args.batch_size = args.batch_size or default_batch
    if args.output is None:
        suffix = "" if args.dataset == "small" else f"_{args.dataset}"
        args.output = common.RESULTS_DIR / f"epochs{suffix}.json"
    dataset = common.ensure_tabular_dataset(spec)
    common.warm_page_cache(common.dataset_files(dataset))
    results = []
    for reader, step in ((r, s) for r in args.readers.split(",") for s in args.steps.split(",")):
        runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for _ in range(args.repeats):
            for early in (False, True):  # alternating: the machine drifts
                runs[early].append(run(dataset["path"], early, step, reader, args))
        for early in (True, False):
            later = [e for r in runs[early] for e in r["epochs"][1:]]
            rps = [e["rows"] / e["seconds"] for e in later]
            prefix = "" if reader == "loader" else f"{reader}_"
            system = f"{prefix}{'early' if early else 'plain'}_{step}"
            known = [e["started_early"] for e in later if e["started_early"] is not None]
            extra = {
                "reader": reader,
                "step": step,
                "step_ms": args.step_ms,
                "wait_median": statistics.median(e["wait"] for e in later),
                "wait_max": max(e["wait"] for e in later),
                "first_batch_ms_median": 1e3 * statistics.median(e["first"] for e in later),
                # None where the pass's engine runs in a worker (not observable here).
                "passes_started_early": sum(known) if known else None,
                "passes": len(later),
            }
            results.append(
                {
                    "system": system,
                    "rows_per_second_median": statistics.median(rps),
                    "seconds_median": statistics.median(e["seconds"] for e in later),
                    "rows_per_run": later[0]["rows"],
                    "peak_rss_mb": max(r["rss_above_mb"] for r in runs[early]),
                    "runs": [
                        {
                            "rows": e["rows"],
                            "seconds": e["seconds"],
                            "rows_per_second": e["rows"] / e["seconds"],
                            "extra": {
                                "wait": e["wait"],
                                "first_batch_s": e["first"],
                                "started_early": e["started_early"],
                            },
                        }
                        for e in later
                    ],
                    "extra": extra,
                }
            )
            print(
                f"{system:12s} wait median {extra['wait_median']:6.1%} (max "
                f"{extra['wait_max']:5.1%})  first batch {extra['first_batch_ms_median']:6.1f} ms  "
                f"{statistics.median(rps):>10,.0f} rows/s  early {extra['passes_started_early']}"
                f"/{extra['passes']}  peak RSS +{results[-1]['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config["data"] = _describe(dataset["path"], spec, args.batch_size)
    out, _ = common.write_results("epochs", dataset, config, results, path=args.output)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
