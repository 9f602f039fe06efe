#!/usr/bin/env bash
# The GPU checks of pin_memory and device= (issue 12, item 5), on a machine with CUDA,
# a CUDA build of torch and a C++20 compiler; the project's CI has no GPU.
#
#   scripts/gpu_check.sh [OUT_DIR]
#
# Builds shardfeed into a folder of its own (SITE, /tmp/shardfeed-site), runs the
# tests that need CUDA (tests/test_cuda.py) with those of pinned memory and torch,
# then bench/bench_gpu.py with two model sizes.  Logs and results go to OUT_DIR
# ($OUT, else /tmp/gpu_check).  Without a network: wheels in .whl/ (pyarrow 26,
# nanobind 2.12.0) are installed into SITE first.  Warnings are not errors here (the
# machine's compiler may be newer than CI's); they are kept in build.log.
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu_check}}
py=${PYTHON:-python3}
site=${SITE:-/tmp/shardfeed-site}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
step() { echo "== $* ($(date +%T))"; }

step environment
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; g++ --version | head -1
} 2>&1 | tee "$out/env.txt"
if compgen -G ".whl/*.whl" > /dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .whl/*.whl || exit 1
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
"$py" -c "import torch, pyarrow, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'pyarrow', pyarrow.__version__, 'numpy', numpy.__version__)" 2>&1 | tee -a "$out/env.txt"

step build
start=$SECONDS
"$py" -m pip install -v --no-build-isolation --no-deps --no-compile --upgrade --target "$site" \
  --config-settings=cmake.define.SHARDFEED_WERROR=OFF . > "$out/build.log" 2>&1
rc=$?
echo "build rc=$rc in $((SECONDS - start)) s; warnings: $(grep -c 'warning:' "$out/build.log")"
if [ $rc -ne 0 ]; then grep -B2 -A6 "error" "$out/build.log" | head -60; exit 1; fi

step tests
"$py" -m pytest -q -p no:cacheprovider -o addopts=-ra tests/test_cuda.py tests/test_pinned.py \
  tests/test_torch.py 2>&1 | tee "$out/pytest.log" | tail -15

step bench_gpu
"$py" bench/bench_gpu.py --output "$out/gpu.json" 2>&1 | tee "$out/bench.log" | grep -v "^WARNING"
"$py" bench/bench_gpu.py --hidden 4096 --steps 200 --output "$out/gpu_h4096.json" 2>&1 \
  | tee -a "$out/bench.log" | grep -v "^WARNING"
step done
