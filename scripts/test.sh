#!/usr/bin/env bash
# Sets up and runs every test: lint, the C++ unit tests (plain, then under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the threaded ones under
# ThreadSanitizer), a short run of each fuzz target, and the Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# GoogleTest, clang-format and clang from Debian's packages (CI machines start bare).
missing=()
dpkg -s libgtest-dev >/dev/null 2>&1 || missing+=(libgtest-dev)
command -v clang-format >/dev/null 2>&1 || missing+=(clang-format)
# clang and its runtime libraries (libFuzzer) for the fuzz targets.
command -v clang++ >/dev/null 2>&1 || missing+=(clang)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || missing+=(libclang-rt-14-dev)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

scripts/setup.sh
VENV=${SHARDFEED_VENV:-.venv}
# shellcheck disable=SC1091
. "$VENV/bin/activate"
PY=$(command -v python)

echo "== lint"
ruff check
ruff format --check
mypy
mypy --strict scripts/check_layers.py
# Layers include only downwards; public headers and the bindings only public headers.
python scripts/check_layers.py
# The committed type stub of the extension must match the built module.
stub=$(mktemp -d)
python -m nanobind.stubgen -q -m shardfeed._core -o "$stub/_core.pyi"
diff -u python/shardfeed/_core.pyi "$stub/_core.pyi"
git ls-files 'cpp/*.h' 'cpp/*.cc' 'bindings/*.h' 'bindings/*.cc' | xargs clang-format --dry-run -Werror

JOBS=${JOBS:-2}
for variant in plain asan; do
  echo "== C++ unit tests ($variant)"
  flags=(-DSHARDFEED_BUILD_PYTHON=OFF -DSHARDFEED_BUILD_TESTS=ON -DPython_EXECUTABLE="$PY")
  if [ "$variant" = asan ]; then
    flags+=(-DSHARDFEED_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  else
    flags+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  cmake -S . -B "build/cpp-$variant" -G Ninja "${flags[@]}" >/dev/null
  cmake --build "build/cpp-$variant" -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "build/cpp-$variant" --output-on-failure -j "$JOBS"
done

# ThreadSanitizer over the tests whose code runs threads (engine, reorder buffer, arena,
# prefetcher, caches, catalog, Delta logs' vectors), clean: cpp/tsan.supp says why Arrow's own
# frames are suppressed.
echo "== C++ unit tests (tsan)"
cmake -S . -B build/cpp-tsan -G Ninja -DSHARDFEED_BUILD_PYTHON=OFF -DSHARDFEED_BUILD_TESTS=ON \
  -DPython_EXECUTABLE="$PY" -DSHARDFEED_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/cpp-tsan -j "$JOBS"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/cpp/tsan.supp" \
  build/cpp-tsan/shardfeed_tests \
  --gtest_filter='Engine*:ReorderBuffer*:SlabArena*:Prefetcher*:FileCache*:CacheLock*:Catalog*:DeltaLog*:MemoryBudget*:MatrixPool*:BatchRecycler*:SharedWork*:Retry*:CallBefore*:FileCheck*:DecodedTier*:WatchedMap*:UsageLedger*:EntryChanges*'

# The fuzz targets (cpp/fuzz/) under ASan + UBSan: every kept crash input
# replayed, then about 20 s of fuzzing per target from the seed corpus.
echo "== fuzz"
cmake -S . -B build/fuzz -G Ninja -DSHARDFEED_BUILD_PYTHON=OFF -DSHARDFEED_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DPython_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$JOBS"
scripts/fuzz.sh "${SHARDFEED_FUZZ_SECONDS:-20}"

echo "== Python tests"
# Run from tests' parent with the installed package (not python/ on sys.path).
python -m pytest -q "$@"
