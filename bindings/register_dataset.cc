// A dataset (its catalog) and the outputs a batch of it holds.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <arrow/type.h>

#include "convert.h"
#include "gil.h"
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

namespace {

using PyPredicate = std::tuple<std::string, std::string, std::vector<FilterValue>>;

FilterSpec ToFilterSpec(const std::vector<std::vector<PyPredicate>>& dnf) {
  static const std::map<std::string, FilterOp> kOps = {
      {"==", FilterOp::kEq}, {"!=", FilterOp::kNe},       {"<", FilterOp::kLt},
      {"<=", FilterOp::kLe}, {">", FilterOp::kGt},        {">=", FilterOp::kGe},
      {"in", FilterOp::kIn}, {"not in", FilterOp::kNotIn}};
  FilterSpec spec;
  for (const auto& conjunction : dnf) {
    auto& out = spec.emplace_back();
    for (const auto& [column, op, values] : conjunction) {
      const auto it = kOps.find(op);
      if (it == kOps.end()) {
        throw StatusError(
            Error(ErrorKind::kInvalidArgument,
                  "filter on column '" + column + "': unknown operator '" + op + "'"));
      }
      out.push_back({column, it->second, values});
    }
  }
  return spec;
}

// What the catalog knows: files, row groups, schema, outputs, vocabularies.
void DefineViews(nb::class_<DatasetHandle>& dataset) {
  dataset
      .def("file_sizes",
           [](const DatasetHandle& d) {
             std::vector<int64_t> out;
             for (const auto& f : d.catalog->files()) out.push_back(f.size);
             return out;
           })
      .def(
          "file_versions",
          [](const DatasetHandle& d) {
            // What tells a file rewritten since the catalog read it (size apart).
            std::vector<std::string> out;
            for (const auto& f : d.catalog->files()) out.push_back(f.version + "|" + f.identity);
            return out;
          },
          "Per file: its modification time and, for a local file, device, inode and change "
          "time, as text.")
      .def("delta_tables",
           [](const DatasetHandle& d) {
             std::vector<std::tuple<nb::str, int64_t, int64_t>> out;
             for (const auto& t : d.catalog->delta_tables()) {
               out.emplace_back(PathToPython(t.table), t.version, t.files);
             }
             return out;
           })
      .def("files",
           [](const DatasetHandle& d) {
             std::vector<nb::str> out;
             for (const auto& f : d.catalog->files()) out.push_back(PathToPython(f.rel_path));
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
            VocabularyOptions options;
            options.min_count = min_count;
            options.max_size = max_size;
            options.num_threads = num_threads;
            arrow::Result<std::vector<std::string>> values;
            {
              ReleaseGil release;
              values = BuildVocabulary(*d.catalog, column, options);
            }
            // Text for string columns, bytes for binary ones (UUIDs, hashes).
            const auto& field = d.catalog->schema()->GetFieldByName(column);
            auto strings = Unwrap(std::move(values));
            // A text value that is not UTF-8 (Parquet does not check) is its
            // bytes, which Vocabulary takes as they are.
            const bool text = !field || VocabularyOfText(*field->type());
            std::vector<std::variant<nb::str, nb::bytes>> out;
            out.reserve(strings.size());
            for (const auto& v : strings) {
              PyObject* decoded =
                  text ? PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), nullptr)
                       : nullptr;
              if (decoded != nullptr) {
                out.emplace_back(nb::steal<nb::str>(decoded));
              } else {
                PyErr_Clear();
                out.emplace_back(nb::bytes(v.data(), v.size()));
              }
            }
            return out;
          },
          "column"_a, "min_count"_a = 1, "max_size"_a = nb::none(),
          "num_threads"_a = VocabularyOptions{}.num_threads,
          "The distinct values of a string (str) or binary (bytes) column, most frequent "
          "first (ties by value).");
}

// filter=: the rows that pass, their counts, and the image kept in cache_dir.
void DefineFilter(nb::class_<DatasetHandle>& dataset) {
  dataset
      .def(
          "filtered",
          [](const DatasetHandle& d, const std::vector<std::vector<PyPredicate>>& dnf,
             const std::string& key, int num_threads, std::optional<nb::bytes> image) {
            const FilterSpec spec = ToFilterSpec(dnf);
            // Checks the filter against the schema even when the image is valid.
            Check(FilteredRows::Check(*d.catalog, spec));
            std::shared_ptr<const FilteredRows> rows;
            if (image) {
              rows = FilteredRows::Deserialize(*d.catalog, key,
                                               std::string(image->c_str(), image->size()));
            }
            if (!rows) {
              // Reads the filter columns (remote storage can stall): interruptible.
              rows = Unwrap(RunInterruptible<arrow::Result<std::shared_ptr<const FilteredRows>>>(
                  [catalog = d.catalog, spec, key, num_threads] {
                    return FilteredRows::Make(*catalog, spec, key, num_threads);
                  }));
            }
            return DatasetHandle{d.catalog, rows};
          },
          "dnf"_a, "key"_a, "num_threads"_a = CatalogOptions{}.num_threads, "image"_a = nb::none(),
          "The dataset restricted to the rows that pass `dnf` (OR of ANDs of (column, op, "
          "values)); `image`: a cached result, used when it is valid for this catalog and key.")
      .def("filter_image",
           [](const DatasetHandle& d) {
             const std::string bytes = d.filter ? d.filter->Serialize() : std::string();
             return nb::bytes(bytes.data(), bytes.size());
           })
      .def(
          "filter_selection",
          [](const DatasetHandle& d) { return d.filter ? d.filter->SelectionDigest() : ""; },
          "Which rows pass the filter, as 16 hex digits ('' without a filter): part of a "
          "filtered stream's fingerprint, since the rows a filter keeps follow the values.")
      .def(
          "filter_counts",
          [](const DatasetHandle& d) {
            nb::dict out;
            if (!d.filter) return out;
            const auto& c = d.filter->counts();
            out["files"] = c.files;
            out["files_pruned_by_partition"] = c.files_pruned_by_partition;
            out["row_groups"] = c.row_groups;
            out["row_groups_pruned_by_partition"] = c.row_groups_pruned_by_partition;
            out["row_groups_pruned_by_statistics"] = c.row_groups_pruned_by_statistics;
            out["row_groups_read"] = c.row_groups_read;
            out["row_groups_kept"] = c.row_groups_kept;
            out["rows"] = c.rows;
            out["rows_pruned_by_partition"] = c.rows_pruned_by_partition;
            out["rows_pruned_by_statistics"] = c.rows_pruned_by_statistics;
            out["rows_pruned_by_rows"] = c.rows_pruned_by_rows;
            out["rows_deleted"] = c.rows_deleted;
            out["rows_kept"] = c.rows_kept;
            out["bytes_read"] = c.bytes_read;
            return out;
          },
          nb::sig("def filter_counts(self) -> dict[str, int]"));
}

}  // namespace

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

  nb::class_<DatasetHandle> dataset(m, "Dataset");
  dataset
      .def(
          "__init__",
          [](DatasetHandle* self, const std::vector<nb::str>& source_texts, int num_threads,
             const std::string& partitioning, double remote_timeout,
             const std::vector<nb::str>& only_files, const std::vector<nb::str>& base_dirs,
             const std::vector<int>& source_globs) {
            const auto sources = PathsFromPython(source_texts);
            CatalogOptions options;
            options.num_threads = num_threads;
            options.remote_timeout = remote_timeout;
            options.only_files = PathsFromPython(only_files);
            options.base_dirs = PathsFromPython(base_dirs);
            options.source_globs = source_globs;
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
            // A Delta table's deleted rows are left out of every stream: as a
            // filter of its own (reading nothing), under any filter= too.
            std::shared_ptr<const FilteredRows> deleted;
            if (catalog->has_deletions()) {
              deleted = Unwrap(FilteredRows::Make(*catalog, {}, "", num_threads));
            }
            new (self) DatasetHandle{std::move(catalog), std::move(deleted)};
          },
          "sources"_a, "num_threads"_a = CatalogOptions{}.num_threads, "partitioning"_a = "hive",
          "remote_timeout"_a = CatalogOptions{}.remote_timeout,
          "only_files"_a = std::vector<nb::str>{}, "base_dirs"_a = std::vector<nb::str>{},
          "source_globs"_a = std::vector<int>{},
          "partitioning: \"hive\" (key=value folders become columns) or \"\" (none); "
          "only_files: non-empty, of the listed files only these (relative paths); "
          "base_dirs: folders the root must contain (the fixed parts of expanded globs); "
          "source_globs: per source, the expanded glob it came from, -1 for none.")
      .def_prop_ro("num_rows", [](const DatasetHandle& d) { return d.catalog->num_rows(); })
      .def_prop_ro("num_files", [](const DatasetHandle& d) { return d.catalog->files().size(); })
      .def_prop_ro("num_row_groups",
                   [](const DatasetHandle& d) { return d.catalog->row_groups().size(); })
      .def_prop_ro("fingerprint", [](const DatasetHandle& d) { return d.catalog->fingerprint(); })
      .def_prop_ro("root", [](const DatasetHandle& d) { return PathToPython(d.catalog->root()); })
      .def_prop_ro("is_local", [](const DatasetHandle& d) { return d.catalog->is_local(); });

  DefineViews(dataset);
  DefineFilter(dataset);
  dataset.def("num_batches", [](const DatasetHandle& d, const PlanOptions& options) {
    return MakePlan(d, options)->num_batches();
  });
}

}  // namespace shardfeed::py
