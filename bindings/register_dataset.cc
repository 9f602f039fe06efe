// A dataset (its catalog) and the outputs a batch of it holds.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <arrow/type.h>

#include "convert.h"
#include "interrupt.h"
#include "register.h"
#include "shardfeed/catalog.h"
#include "shardfeed/output.h"
#include "shardfeed/plan.h"
#include "shardfeed/status.h"
#include "shardfeed/vocabulary.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {

void RegisterDataset(nb::module_& m) {
  nb::class_<StackSpec>(m, "StackSpec")
      .def(nb::init<>())
      .def_rw("name", &StackSpec::name)
      .def_rw("columns", &StackSpec::columns);

  nb::class_<OutputOptions>(m, "OutputOptions")
      .def(nb::init<>())
      .def_rw("columns", &OutputOptions::columns)
      .def_rw("all_columns", &OutputOptions::all_columns)
      .def_rw("stacks", &OutputOptions::stacks)
      .def_rw("with_sample_id", &OutputOptions::with_sample_id)
      .def_rw("fill_null", &OutputOptions::fill_null)
      .def_rw("fill_null_columns", &OutputOptions::fill_null_columns)
      .def_rw("transforms", &OutputOptions::transforms);

  nb::class_<DatasetHandle>(m, "Dataset")
      .def(
          "__init__",
          [](DatasetHandle* self, const std::vector<std::string>& sources, int num_threads,
             const std::string& partitioning, double remote_timeout) {
            CatalogOptions options;
            options.num_threads = num_threads;
            options.remote_timeout = remote_timeout;
            if (partitioning == "hive") {
              options.partitioning = Partitioning::kHive;
            } else if (partitioning.empty()) {
              options.partitioning = Partitioning::kNone;
            } else {
              throw StatusError(
                  Error(ErrorKind::kInvalidArgument,
                        "partitioning must be \"hive\" or None, got '" + partitioning + "'"));
            }
            // Reading footers can stall on remote storage: stay interruptible.
            std::shared_ptr<Catalog> catalog =
                Unwrap(RunInterruptible<arrow::Result<std::shared_ptr<Catalog>>>(
                    [sources, options] { return Catalog::Open(sources, options); }));
            new (self) DatasetHandle{std::move(catalog)};
          },
          "sources"_a, "num_threads"_a = CatalogOptions{}.num_threads, "partitioning"_a = "hive",
          "remote_timeout"_a = CatalogOptions{}.remote_timeout,
          "partitioning: \"hive\" (key=value folders become columns) or \"\" (none).")
      .def_prop_ro("num_rows", [](const DatasetHandle& d) { return d.catalog->num_rows(); })
      .def_prop_ro("num_files", [](const DatasetHandle& d) { return d.catalog->files().size(); })
      .def_prop_ro("num_row_groups",
                   [](const DatasetHandle& d) { return d.catalog->row_groups().size(); })
      .def_prop_ro("fingerprint", [](const DatasetHandle& d) { return d.catalog->fingerprint(); })
      .def_prop_ro("root", [](const DatasetHandle& d) { return d.catalog->root(); })
      .def_prop_ro("is_local", [](const DatasetHandle& d) { return d.catalog->is_local(); })
      .def("file_sizes",
           [](const DatasetHandle& d) {
             std::vector<int64_t> out;
             for (const auto& f : d.catalog->files()) out.push_back(f.size);
             return out;
           })
      .def("files",
           [](const DatasetHandle& d) {
             std::vector<std::string> out;
             for (const auto& f : d.catalog->files()) out.push_back(f.rel_path);
             return out;
           })
      .def("row_groups",
           [](const DatasetHandle& d) {
             std::vector<std::tuple<int32_t, int32_t, int64_t, int64_t, int64_t>> out;
             for (const auto& rg : d.catalog->row_groups()) {
               out.emplace_back(rg.file, rg.row_group, rg.num_rows, rg.first_row, rg.total_bytes);
             }
             return out;
           })
      .def("schema",
           [](const DatasetHandle& d) {
             std::vector<std::pair<std::string, std::string>> out;
             if (d.catalog->schema()) {
               for (const auto& f : d.catalog->schema()->fields()) {
                 out.emplace_back(f->name(), f->type()->ToString());
               }
             }
             return out;
           })
      .def(
          "columns",
          [](const DatasetHandle& d) {
            // (name, type, partition key index or -1, distinct file types,
            //  files lacking the column, conflict message or "")
            std::vector<std::tuple<std::string, std::string, int, std::vector<std::string>, int64_t,
                                   std::string>>
                out;
            const auto& schema = d.catalog->schema();
            for (int i = 0; schema && i < schema->num_fields(); ++i) {
              const auto& origin = d.catalog->column_origins()[static_cast<size_t>(i)];
              out.emplace_back(schema->field(i)->name(), schema->field(i)->type()->ToString(),
                               origin.partition_key, origin.file_types, origin.missing_files,
                               origin.conflict);
            }
            return out;
          },
          "Where each dataset column comes from: (name, type, partition key or -1, the "
          "types in the files, files that lack it, conflict).")
      .def("describe_outputs",
           [](const DatasetHandle& d, const OutputOptions& options) {
             std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::string,
                                    std::string>>
                 out;
             for (const auto& info : Unwrap(DescribeOutputs(*d.catalog->schema(), options))) {
               out.emplace_back(info.name, DTypeName(info.dtype), info.inner_shape,
                                info.source_type, info.unit);
             }
             return out;
           })
      .def(
          "vocabulary",
          [](const DatasetHandle& d, const std::string& column, int64_t min_count,
             std::optional<int64_t> max_size, int num_threads) {
            nb::gil_scoped_release release;
            VocabularyOptions options;
            options.min_count = min_count;
            options.max_size = max_size;
            options.num_threads = num_threads;
            return Unwrap(BuildVocabulary(*d.catalog, column, options));
          },
          "column"_a, "min_count"_a = 1, "max_size"_a = nb::none(),
          "num_threads"_a = VocabularyOptions{}.num_threads,
          "The distinct values of a string column, most frequent first (ties by value).")
      .def("num_batches", [](const DatasetHandle& d, const PlanOptions& options) {
        return MakePlan(*d.catalog, options)->num_batches();
      });
}

}  // namespace shardfeed::py
