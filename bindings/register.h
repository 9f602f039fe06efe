// What the register_<area>.cc files of the module share (private to the
// bindings): one Register function per area, called in order by module.cc,
// and the handles that more than one area passes around.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "shardfeed/catalog.h"
#include "shardfeed/filter.h"
#include "shardfeed/plan.h"

namespace shardfeed::py {

// A dataset as Python holds it: the catalog, shared with every engine.
struct DatasetHandle {
  std::shared_ptr<const Catalog> catalog;
  std::shared_ptr<const FilteredRows> filter;  // null: every row
};

// The rank's plan for one epoch of the catalog; raises on bad options.
std::shared_ptr<const EpochPlan> MakePlan(const Catalog& catalog, const PlanOptions& options);
// Over the rows that pass the dataset's filter, when it has one.
std::shared_ptr<const EpochPlan> MakePlan(const DatasetHandle& d, const PlanOptions& options);

// In the order module.cc calls them (the order of the stub's definitions).
void RegisterPlan(nanobind::module_& m);        // PlanOptions, plan_sample_ids, plan_batch_sizes
void RegisterTransforms(nanobind::module_& m);  // TransformSpec, sample_uniform
void RegisterDataset(nanobind::module_& m);     // StackSpec, OutputOptions, Dataset
void RegisterCache(nanobind::module_& m);       // FileCache, DecodedTier, open_*
void RegisterEngine(nanobind::module_& m);      // EngineOptions, Engine, live_buffers

}  // namespace shardfeed::py
