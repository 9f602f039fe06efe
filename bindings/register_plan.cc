// The epoch plan: its options, and whole-epoch views for tests of its invariants.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "convert.h"
#include "gil.h"
#include "register.h"
#include "shardfeed/plan.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {

std::shared_ptr<const EpochPlan> MakePlan(const Catalog& catalog, const PlanOptions& options) {
  return Unwrap(EpochPlan::Make(catalog.RowGroupRows(), options));
}

std::shared_ptr<const EpochPlan> MakePlan(const DatasetHandle& d, const PlanOptions& options) {
  if (d.filter) return Unwrap(EpochPlan::Make(d.filter->pass_rows(), options));
  return MakePlan(*d.catalog, options);
}

void RegisterPlan(nb::module_& m) {
  nb::class_<PlanOptions>(m, "PlanOptions")
      .def(nb::init<>())
      .def_rw("seed", &PlanOptions::seed)
      .def_rw("epoch", &PlanOptions::epoch)
      .def_rw("shuffle", &PlanOptions::shuffle)
      .def_rw("window_row_groups", &PlanOptions::window_row_groups)
      .def_rw("global_shuffle", &PlanOptions::global_shuffle)
      .def_rw("batch_size", &PlanOptions::batch_size)
      .def_rw("world_size", &PlanOptions::world_size)
      .def_rw("rank", &PlanOptions::rank)
      .def_rw("drop_last", &PlanOptions::drop_last)
      .def(
          "validate", [](const PlanOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a setting out of range.");

  m.def(
      "plan_sample_ids",
      [](const std::vector<int64_t>& row_group_rows, const PlanOptions& options) {
        // The rank's whole epoch as natural-order sample ids: for tests of the
        // plan's invariants on small inputs.
        std::vector<int64_t> ids;
        {
          ReleaseGil release;
          auto plan = Unwrap(EpochPlan::Make(row_group_rows, options));
          std::vector<int64_t> first(row_group_rows.size() + 1, 0);
          for (size_t i = 0; i < row_group_rows.size(); ++i) {
            first[i + 1] = first[i] + row_group_rows[i];
          }
          std::vector<SampleRef> samples;
          plan->Resolve(plan->rank_begin(), plan->rank_begin() + plan->rank_size(), &samples);
          ids.reserve(samples.size());
          for (const auto& s : samples)
            ids.push_back(first[static_cast<size_t>(s.row_group)] + s.row);
        }
        return ids;
      },
      "row_group_rows"_a, "options"_a);

  m.def(
      "plan_batch_sizes",
      [](const std::vector<int64_t>& row_group_rows, const PlanOptions& options) {
        auto plan = Unwrap(EpochPlan::Make(row_group_rows, options));
        std::vector<int64_t> sizes;
        for (int64_t b = 0; b < plan->num_batches(); ++b) sizes.push_back(plan->BatchSize(b));
        return sizes;
      },
      "row_group_rows"_a, "options"_a);
}

}  // namespace shardfeed::py
