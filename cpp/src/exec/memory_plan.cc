// PlanMemory: the default shuffle window and what an engine will hold, from
// the footers alone (shardfeed/engine.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "exec/footprint.h"
#include "shardfeed/engine.h"
#include "shardfeed/status.h"
#include "transform/layout.h"

namespace shardfeed {

namespace {
// The window without a memory limit: the first version's default.
constexpr int64_t kUnlimitedWindow = 4;
// A window plus the next one being decoded take 3/4 of the limit.
constexpr double kWindowShare = 3.0 / 8.0;
// What a window costs besides its decoded rows: the plan's permutation of it.
constexpr int64_t kPermutationBytesPerRow = 8;

// Expected 1 / P(two rows of a batch come from one row group) with windows
// of `window` row groups with rows (as EpochPlan makes them: empty ones do not
// count), taken in natural order (every window equally likely).
double ExpectedMixing(std::span<const int64_t> rows, int64_t window, bool shuffle) {
  if (!shuffle) return 1.0;
  double same = 0, total = 0;
  size_t i = 0;
  while (i < rows.size()) {
    double n = 0, pairs = 0;
    for (int64_t counted = 0; i < rows.size() && counted < window; ++i) {
      const auto r = static_cast<double>(std::max<int64_t>(rows[i], 0));
      if (r <= 0) continue;
      ++counted;
      n += r;
      pairs += r * (r - 1);
    }
    if (n < 2) continue;
    same += n * pairs / (n * (n - 1));  // weighted by the window's rows
    total += n;
  }
  if (total <= 0 || same <= 0) return 1.0;
  return total / same;
}
// Bytes from a sum of untrusted footer sizes: saturated, never a cast of a
// double past int64 (undefined).
int64_t ToBytes(double bytes) {
  if (!(bytes > 0)) return 0;
  if (!(bytes < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(bytes);
}
}  // namespace

int64_t LeastLimitForWindow(int64_t target, double cost_mean) {
  if (target <= 0 || !(cost_mean > 0)) return 0;
  // The default window is floor(kWindowShare * limit / cost_mean).  Footer
  // sizes are untrusted: a limit past int64 saturates (no cast of a too large
  // double), and the rounding is mended in steps that still move the double
  // (+1 stops moving it past 2^53), a few of them.
  constexpr double kMax = 9.2e18;
  const double needed = std::ceil(static_cast<double>(target) * cost_mean / kWindowShare);
  if (!(needed < kMax)) return std::numeric_limits<int64_t>::max();
  auto limit = static_cast<int64_t>(needed);
  const int64_t step = std::max<int64_t>(1, limit >> 50);
  for (int i = 0; i < 64 && static_cast<int64_t>(kWindowShare * static_cast<double>(limit) /
                                                 cost_mean) < target;
       ++i) {
    limit += step;
  }
  return limit;
}

arrow::Result<MemoryPlan> PlanMemory(const std::shared_ptr<const Catalog>& catalog_ptr,
                                     std::span<const int64_t> row_group_rows,
                                     const PlanOptions& plan, const EngineOptions& engine) {
  ARROW_RETURN_NOT_OK(engine.Validate());
  if (!catalog_ptr) return Error(ErrorKind::kInvalidArgument, "PlanMemory: no catalog");
  const Catalog& catalog = *catalog_ptr;
  const auto& rgs = catalog.row_groups();
  if (row_group_rows.size() != rgs.size()) {
    return Error(ErrorKind::kInvalidArgument,
                 "row_group_rows has " + std::to_string(row_group_rows.size()) +
                     " entries, the catalog " + std::to_string(rgs.size()) + " row groups");
  }
  if (plan.window_row_groups < 0) {
    return Error(ErrorKind::kInvalidArgument, "shuffle_window must be at least 1 row group, got " +
                                                  std::to_string(plan.window_row_groups));
  }
  ARROW_ASSIGN_OR_RAISE(Layout layout, MakeLayout(*catalog.schema(), engine.output));
  const auto shared_footprints = Footprints(catalog_ptr, layout);
  const std::vector<RowGroupFootprint>& footprints = *shared_footprints;

  MemoryPlan out;
  // A window's cost per row group: the rows the plan keeps (a filter drops
  // some after the read) and their permutation entries.
  double cost_sum = 0, decoded_sum = 0, reserve_sum = 0;
  int64_t reserve_max = 0, nonempty = 0;
  for (size_t i = 0; i < rgs.size(); ++i) {
    const int64_t rows = std::max<int64_t>(row_group_rows[i], 0);
    if (rows == 0) continue;
    ++nonempty;
    const double kept = rgs[i].num_rows > 0
                            ? static_cast<double>(rows) / static_cast<double>(rgs[i].num_rows)
                            : 1.0;
    const double decoded = static_cast<double>(footprints[i].decoded) * std::min(kept, 1.0);
    decoded_sum += decoded;
    cost_sum += decoded + static_cast<double>(kPermutationBytesPerRow * rows) +
                static_cast<double>(footprints[i].held_objects) +
                static_cast<double>(footprints[i].matrix_extra) * std::min(kept, 1.0);
    out.max_row_group_bytes = std::max(out.max_row_group_bytes, footprints[i].decoded);
    const int64_t reserve = DecodeReservation(footprints[i], rgs[i].total_bytes);
    reserve_sum += static_cast<double>(reserve);
    reserve_max = std::max(reserve_max, reserve);
  }
  const double cost_mean = nonempty ? cost_sum / static_cast<double>(nonempty) : 0;
  out.row_group_bytes =
      nonempty ? static_cast<int64_t>(decoded_sum / static_cast<double>(nonempty)) : 0;
  const double reserve_mean = nonempty ? reserve_sum / static_cast<double>(nonempty) : 0;

  int64_t window = plan.window_row_groups;
  if (plan.shuffle && plan.global_shuffle) {
    window = std::max<int64_t>(1, static_cast<int64_t>(rgs.size()));  // one window of them all
  } else if (window == 0) {
    if (engine.memory_limit == 0 || cost_mean <= 0) {
      window = kUnlimitedWindow;
    } else {
      window =
          static_cast<int64_t>(kWindowShare * static_cast<double>(engine.memory_limit) / cost_mean);
    }
    window = std::clamp<int64_t>(window, 1, std::max<int64_t>(nonempty, 1));
  }
  out.window_row_groups = window;
  out.limit_for_target_window =
      LeastLimitForWindow(std::min<int64_t>(MemoryPlan::kMixingTarget, nonempty), cost_mean);
  // A window holds at most every row group with rows, whatever was asked for.
  const int64_t w = plan.shuffle ? std::min(window, std::max<int64_t>(nonempty, 1)) : 1;

  // No batch holds more rows than the dataset keeps, and no more batches wait than
  // the epoch has.
  double kept_rows = 0;
  for (const int64_t rows : row_group_rows)
    kept_rows += static_cast<double>(std::max<int64_t>(rows, 0));
  const int64_t batch_rows = kept_rows >= static_cast<double>(plan.batch_size)
                                 ? plan.batch_size
                                 : std::max<int64_t>(1, static_cast<int64_t>(kept_rows));
  out.batch_bytes = EstimateBatchBytes(footprints, catalog, batch_rows);
  out.ready_batches = ReadyBatchCapacity(out.batch_bytes, engine.num_threads, engine.queue_depth,
                                         engine.memory_limit);
  const double epoch_batches = std::ceil(kept_rows / static_cast<double>(batch_rows));
  if (epoch_batches < static_cast<double>(out.ready_batches)) {
    out.ready_batches = std::max<int64_t>(1, static_cast<int64_t>(epoch_batches));
  }
  // shuffle="global" gathers from the decoded tier's mapped entries: the
  // page cache's memory, not the budget's.
  const double window_bytes = plan.global_shuffle ? 0.0 : static_cast<double>(w) * cost_mean;
  const double batches = static_cast<double>(out.ready_batches * out.batch_bytes);
  // Unlimited: the window being read, the next one, a decode per thread and
  // every ready batch.  The floor: the window being read and one decode.
  const double unlimited =
      2 * window_bytes +
      std::min<double>(engine.num_threads, static_cast<double>(nonempty)) * reserve_mean + batches;
  const double floor = window_bytes + static_cast<double>(reserve_max + out.batch_bytes);
  out.floor_bytes = ToBytes(floor);
  out.start_bytes = ToBytes(unlimited - window_bytes);
  // Under a limit, decodes ahead fill it, and the next batch's decode may
  // then go past it by one row group's reservation.
  double peak = unlimited;
  if (engine.memory_limit > 0) {
    peak = std::max(floor, std::min(unlimited, static_cast<double>(engine.memory_limit) +
                                                   static_cast<double>(reserve_max)));
  }
  out.expected_peak_bytes = ToBytes(peak);
  out.expected_mixing = ExpectedMixing(row_group_rows, w, plan.shuffle);
  return out;
}

}  // namespace shardfeed
