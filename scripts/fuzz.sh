#!/usr/bin/env bash
# Runs the libFuzzer targets built in build/fuzz (cmake -DSHARDFEED_FUZZ=ON with
# clang; scripts/test.sh builds them): first replays every input kept in
# cpp/fuzz/regressions/<target>/, then fuzzes each target for SECONDS (default
# 20) from its seed corpus in cpp/fuzz/corpus/<target>/.  New corpus entries
# go to build/fuzz/work/<target>/ (kept between runs, never into the repo);
# a crash leaves its input in build/fuzz/artifacts/ and fails the script.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(catalog_fuzz decode_fuzz decoded_tier_fuzz deletion_vector_fuzz delta_log_fuzz)

# Arrow's buffers from malloc, so that ASan sees them too (not from mimalloc).
export ARROW_DEFAULT_MEMORY_POOL=system
# An allocation that cannot be served fails (null, Arrow's OutOfMemory) as it does in
# production, rather than aborting: what the loader must then do is fail cleanly.
# max_allocation_size_mb: Arrow reserves some buffers by counts it reads from page
# headers before it finds the page too short (a dictionary page of 6.7e8 strings
# reserves 10 GiB).  Outside ASan such a reservation is virtual, never touched; under
# ASan its shadow (an eighth of it) is written at once, and 10 GiB put 1.3 GB into
# the fuzzer's RSS (CI's out-of-memory of 2026-11-30).  Past 2 GiB an allocation
# fails instead, as it would on a machine with that much memory.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=2048}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p build/fuzz/artifacts
for target in "${targets[@]}"; do
  bin=build/fuzz/cpp/fuzz/$target
  log=build/fuzz/artifacts/$target.log
  kept=(cpp/fuzz/regressions/"$target"/*)
  if [ -e "${kept[0]}" ]; then
    echo "== $target: replaying ${#kept[@]} regression inputs"
    # Each input alone, from a fresh process: 1 GB is far more than any needs.
    if ! "$bin" -rss_limit_mb=1024 -malloc_limit_mb=65536 "${kept[@]}" >"$log" 2>&1; then
      tail -n 60 "$log"
      echo "$target: a regression input fails again"
      exit 1
    fi
  fi
  echo "== $target: fuzzing for ${seconds} s"
  mkdir -p "build/fuzz/work/$target"
  # -rss_limit_mb: a footer must not make us use gigabytes; -timeout: nor loop
  # for long on one input.  -malloc_limit_mb: libFuzzer's own check of single
  # allocations, left above ASan's max_allocation_size_mb (above), which fails
  # the virtual reservations cleanly; resident memory is what -rss_limit_mb bounds.
  if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=65536 -timeout=10 \
    -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$target-" \
    "build/fuzz/work/$target" "cpp/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "$target: crash (input in build/fuzz/artifacts/)"
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done" "$log" || true
done
