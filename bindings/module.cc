// The nanobind module shardfeed._core: thin handles over the C++ core.  Every
// method that blocks or reads files releases the GIL; errors cross as
// StatusError and become shardfeed._errors classes (see convert.cc).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <arrow/type.h>

#include "convert.h"
#include "shardfeed/batch.h"
#include "shardfeed/cache.h"
#include "shardfeed/catalog.h"
#include "shardfeed/engine.h"
#include "shardfeed/filter.h"
#include "shardfeed/plan.h"
#include "shardfeed/rng.h"
#include "shardfeed/status.h"
#include "shardfeed/transform.h"
#include "shardfeed/vocabulary.h"
#include "tier/decoded_tier.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {
namespace {

struct DatasetHandle {
  std::shared_ptr<const Catalog> catalog;
  std::shared_ptr<const FilteredRows> filter;  // null: every row
};

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

class EngineHandle {
 public:
  EngineHandle(std::unique_ptr<Engine> engine, int64_t num_batches)
      : engine_(std::move(engine)), num_batches_(num_batches) {}
  ~EngineHandle() {
    nb::gil_scoped_release release;
    engine_.reset();  // stops and joins the workers
  }

  nb::object Next() {
    std::shared_ptr<Batch> batch;
    {
      nb::gil_scoped_release release;
      batch = Unwrap(engine_->Next());
    }
    if (!batch) return nb::none();
    return BatchToDict(*batch);
  }

  void Close() {
    nb::gil_scoped_release release;
    engine_->Stop();
  }

  int64_t num_units() const { return engine_->num_units(); }

  std::vector<std::tuple<int, std::string, double, double, int64_t>> Trace() const {
    std::vector<std::tuple<int, std::string, double, double, int64_t>> out;
    for (const auto& e : engine_->trace()) {
      out.emplace_back(e.worker, e.stage, e.start_us, e.duration_us, e.arg);
    }
    return out;
  }
  int64_t num_batches() const { return num_batches_; }

  nb::dict Stats() const {
    const EngineStats s = engine_->stats();
    nb::dict d;
    d["row_groups_decoded"] = s.row_groups_decoded;
    d["rows_decoded"] = s.rows_decoded;
    d["bytes_decoded"] = s.bytes_decoded;
    d["batches"] = s.batches;
    d["rows_delivered"] = s.rows_delivered;
    d["threads"] = s.threads;
    d["elapsed_seconds"] = s.elapsed_seconds;
    nb::dict stages;
    for (const auto& st : s.stages) {
      nb::dict one;
      one["seconds"] = st.seconds;
      one["bytes"] = st.bytes;
      one["rows"] = st.rows;
      stages[st.name.c_str()] = one;
    }
    d["stages"] = stages;
    d["worker_wait_seconds"] = s.worker_wait_seconds;
    d["consumer_wait_seconds"] = s.consumer_wait_seconds;
    d["decoded_row_groups"] = s.decoded_row_groups;
    d["peak_live_row_groups"] = s.peak_live_row_groups;
    return d;
  }

 private:
  std::unique_ptr<Engine> engine_;
  int64_t num_batches_;
};

std::shared_ptr<const EpochPlan> MakePlan(const Catalog& catalog, const PlanOptions& options) {
  return Unwrap(EpochPlan::Make(catalog.RowGroupRows(), options));
}

std::shared_ptr<const EpochPlan> MakePlan(const DatasetHandle& d, const PlanOptions& options) {
  if (d.filter) return Unwrap(EpochPlan::Make(d.filter->pass_rows(), options));
  return MakePlan(*d.catalog, options);
}

}  // namespace
}  // namespace shardfeed::py

NB_MODULE(_core, m) {
  using namespace shardfeed;
  using namespace shardfeed::py;
  RegisterErrorTranslator();

  nb::class_<PlanOptions>(m, "PlanOptions")
      .def(nb::init<>())
      .def_rw("seed", &PlanOptions::seed)
      .def_rw("epoch", &PlanOptions::epoch)
      .def_rw("shuffle", &PlanOptions::shuffle)
      .def_rw("window_row_groups", &PlanOptions::window_row_groups)
      .def_rw("batch_size", &PlanOptions::batch_size)
      .def_rw("world_size", &PlanOptions::world_size)
      .def_rw("rank", &PlanOptions::rank)
      .def_rw("drop_last", &PlanOptions::drop_last)
      .def(
          "validate", [](const PlanOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a setting out of range.");

  nb::class_<StackSpec>(m, "StackSpec")
      .def(nb::init<>())
      .def_rw("name", &StackSpec::name)
      .def_rw("columns", &StackSpec::columns);

  nb::class_<TransformSpec>(m, "TransformSpec")
      .def(nb::init<>())
      .def_prop_rw(
          "op", [](const TransformSpec& t) { return std::string(TransformOpName(t.op)); },
          [](TransformSpec& t, const std::string& name) { t.op = Unwrap(ParseTransformOp(name)); })
      .def_rw("column", &TransformSpec::column)
      .def_rw("a", &TransformSpec::a)
      .def_rw("b", &TransformSpec::b)
      .def_rw("n", &TransformSpec::n)
      .def_rw("boundaries", &TransformSpec::boundaries)
      .def_prop_rw(
          "values",
          [](const TransformSpec& t) {
            return t.vocabulary ? t.vocabulary->values() : std::vector<std::string>{};
          },
          [](TransformSpec& t, std::vector<std::string> values) {
            nb::gil_scoped_release release;
            t.vocabulary = Unwrap(VocabularyTable::Make(std::move(values)));
          },
          "Vocabulary: the values (setting it builds the lookup table once).")
      .def_prop_rw(
          "dtype", [](const TransformSpec& t) { return std::string(DTypeName(t.dtype)); },
          [](TransformSpec& t, const std::string& name) {
            if (!ParseDType(name, &t.dtype)) {
              throw StatusError(Error(ErrorKind::kInvalidArgument, "unknown dtype '" + name + "'"));
            }
          });

  nb::class_<OutputOptions>(m, "OutputOptions")
      .def(nb::init<>())
      .def_rw("columns", &OutputOptions::columns)
      .def_rw("all_columns", &OutputOptions::all_columns)
      .def_rw("stacks", &OutputOptions::stacks)
      .def_rw("with_sample_id", &OutputOptions::with_sample_id)
      .def_rw("fill_null", &OutputOptions::fill_null)
      .def_rw("fill_null_columns", &OutputOptions::fill_null_columns)
      .def_rw("transforms", &OutputOptions::transforms);

  nb::class_<EngineOptions>(m, "EngineOptions")
      .def(nb::init<>())
      .def_rw("output", &EngineOptions::output)
      .def_rw("num_threads", &EngineOptions::num_threads)
      .def_rw("queue_depth", &EngineOptions::queue_depth)
      .def_rw("start_batch", &EngineOptions::start_batch)
      .def_rw("batch_offset", &EngineOptions::batch_offset)
      .def_rw("batch_stride", &EngineOptions::batch_stride)
      .def_rw("decoded_tier", &EngineOptions::decoded_tier)
      .def_rw("file_cache", &EngineOptions::file_cache)
      .def_rw("prefetch_bytes", &EngineOptions::prefetch_bytes)
      .def_rw("trace", &EngineOptions::trace)
      .def_rw("debug_max_delay_us", &EngineOptions::debug_max_delay_us)
      .def_rw("debug_slow_stage", &EngineOptions::debug_slow_stage)
      .def_rw("debug_slow_us", &EngineOptions::debug_slow_us)
      .def(
          "validate", [](const EngineOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a setting out of range.");

  nb::class_<CacheOptions>(m, "CacheOptions")
      .def(nb::init<>())
      .def_rw("limit_bytes", &CacheOptions::limit_bytes)
      .def(
          "validate", [](const CacheOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a limit out of range.");

  nb::class_<DecodedTier>(m, "DecodedTier")
      .def(
          "stats",
          [](const DecodedTier& t) {
            const auto s = t.stats();
            nb::dict d;
            d["decoded_hits"] = s.hits;
            d["decoded_misses"] = s.misses;
            d["decoded_stored_bytes"] = s.stored_bytes;
            d["decoded_skipped"] = s.skipped;
            d["decoded_bytes"] = s.bytes_on_disk;
            d["decoded_corrupt"] = s.corrupt;
            return d;
          },
          nb::sig("def stats(self) -> dict[str, int]"));
  nb::class_<FileCache>(m, "FileCache")
      .def(
          "stats",
          [](const FileCache& c) {
            const auto s = c.stats();
            nb::dict d;
            d["remote_bytes"] = s.remote_bytes;
            d["cache_hits"] = s.cache_hits;
            d["cache_misses"] = s.cache_misses;
            d["cache_bytes"] = s.cache_bytes;
            d["evictions"] = s.evictions;
            d["uncached_reads"] = s.uncached_reads;
            d["fetch_seconds"] = s.fetch_seconds;
            d["prefetch_wait_seconds"] = s.prefetch_wait_seconds;
            return d;
          },
          nb::sig("def stats(self) -> dict[str, typing.Any]"))
      .def("usage",
           [](const FileCache& c) {
             CacheUsage u;
             {
               nb::gil_scoped_release release;
               u = Unwrap(c.Usage());
             }
             return std::make_pair(u.entries, u.bytes);
           })
      .def("clear",
           [](FileCache& c) {
             nb::gil_scoped_release release;
             return Unwrap(c.Clear());
           })
      .def(
          "warm",
          [](FileCache& c, const DatasetHandle& d, size_t file) {
            nb::gil_scoped_release release;
            const auto& catalog = *d.catalog;
            if (file >= catalog.files().size()) {
              throw StatusError(Error(ErrorKind::kInvalidArgument, "no such file"));
            }
            const auto& f = catalog.files()[file];
            return Unwrap(c.Warm(catalog.filesystem(),
                                 {catalog.storage_id() + "|" + f.path, f.path, f.size, f.version}));
          },
          "dataset"_a, "file"_a, "Downloads file number `file` of the dataset unless cached.");
  m.def(
      "open_file_cache",
      [](const std::string& dir, int64_t limit_bytes) {
        nb::gil_scoped_release release;
        CacheOptions options;
        options.dir = dir;
        options.limit_bytes = limit_bytes;
        return Unwrap(FileCache::Open(options));
      },
      "dir"_a, "limit_bytes"_a);
  m.def(
      "open_decoded_tier",
      [](const std::string& dir, int64_t limit_bytes) {
        return Unwrap(DecodedTier::Open(dir, limit_bytes));
      },
      "dir"_a, "limit_bytes"_a);

  nb::class_<DatasetHandle>(m, "Dataset")
      .def(
          "__init__",
          [](DatasetHandle* self, const std::vector<std::string>& sources, int num_threads,
             const std::string& partitioning) {
            std::shared_ptr<Catalog> catalog;
            {
              nb::gil_scoped_release release;
              CatalogOptions options;
              options.num_threads = num_threads;
              if (partitioning == "hive") {
                options.partitioning = Partitioning::kHive;
              } else if (partitioning.empty()) {
                options.partitioning = Partitioning::kNone;
              } else {
                throw StatusError(
                    Error(ErrorKind::kInvalidArgument,
                          "partitioning must be \"hive\" or None, got '" + partitioning + "'"));
              }
              catalog = Unwrap(Catalog::Open(sources, options));
            }
            new (self) DatasetHandle{std::move(catalog), nullptr};
          },
          "sources"_a, "num_threads"_a = CatalogOptions{}.num_threads, "partitioning"_a = "hive",
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
            nb::gil_scoped_release release;
            if (!rows) rows = Unwrap(FilteredRows::Make(*d.catalog, spec, key, num_threads));
            return DatasetHandle{d.catalog, rows};
          },
          "dnf"_a, "key"_a, "num_threads"_a = 8, "image"_a = nb::none(),
          "The dataset restricted to the rows that pass `dnf` (OR of ANDs of (column, op, "
          "values)); `image`: a cached result, used when it is valid for this catalog and key.")
      .def("filter_image",
           [](const DatasetHandle& d) {
             const std::string bytes = d.filter ? d.filter->Serialize() : std::string();
             return nb::bytes(bytes.data(), bytes.size());
           })
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
            out["rows_kept"] = c.rows_kept;
            out["bytes_read"] = c.bytes_read;
            return out;
          },
          nb::sig("def filter_counts(self) -> dict[str, int]"))
      .def("num_batches", [](const DatasetHandle& d, const PlanOptions& options) {
        return MakePlan(d, options)->num_batches();
      });

  nb::class_<EngineHandle>(m, "Engine", nb::is_weak_referenceable())
      .def(
          "__init__",
          [](EngineHandle* self, const DatasetHandle& d, const PlanOptions& plan_options,
             const EngineOptions& options) {
            std::unique_ptr<Engine> engine;
            int64_t num_batches = 0;
            {
              nb::gil_scoped_release release;
              auto plan = MakePlan(d, plan_options);
              num_batches = plan->num_batches();
              EngineOptions with_filter = options;
              with_filter.filter = d.filter;
              engine = Unwrap(Engine::Make(d.catalog, plan, with_filter));
            }
            new (self) EngineHandle(std::move(engine), num_batches);
          },
          "dataset"_a, "plan"_a, "options"_a)
      .def("next", &EngineHandle::Next,
           nb::sig("def next(self) -> dict[str, numpy.typing.NDArray[typing.Any]] | None"),
           "The next batch as {name: array}, None after the last; raises the first error.")
      .def("close", &EngineHandle::Close)
      .def_prop_ro("num_units", &EngineHandle::num_units)
      .def_prop_ro("num_batches", &EngineHandle::num_batches)
      .def("trace", &EngineHandle::Trace,
           "Timeline events (worker, stage, start_us, duration_us, arg); needs options.trace.")
      .def("stats", &EngineHandle::Stats, nb::sig("def stats(self) -> dict[str, typing.Any]"));

  m.def(
      "plan_sample_ids",
      [](const std::vector<int64_t>& row_group_rows, const PlanOptions& options) {
        // The rank's whole epoch as natural-order sample ids: for tests of the
        // plan's invariants on small inputs.
        std::vector<int64_t> ids;
        {
          nb::gil_scoped_release release;
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

  m.def(
      "sample_uniform",
      [](nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> sample_ids,
         uint64_t seed, uint64_t epoch, uint64_t stream, int64_t size) {
        // Per-sample uniforms in [0, 1) from the same counter-based generator as
        // the built-in transforms, keyed by (seed, epoch, stream, sample id); one
        // call per batch, no Python per sample.
        const auto n = static_cast<int64_t>(sample_ids.shape(0));
        auto out = std::make_shared<OutputBuffer>(static_cast<size_t>(n * size) * sizeof(double));
        {
          nb::gil_scoped_release release;
          const uint64_t purpose = static_cast<uint64_t>(Purpose::kUserBase) + stream;
          auto* dst = out->As<double>();
          for (int64_t i = 0; i < n; ++i) {
            CounterRng rng(seed, epoch, purpose, static_cast<uint64_t>(sample_ids(i)));
            for (int64_t j = 0; j < size; ++j) dst[i * size + j] = rng.Uniform();
          }
        }
        Batch batch;
        batch.arrays.push_back({"u", DType::kFloat64, {n, size}, out});
        return nb::object(BatchToDict(batch)["u"]);
      },
      "sample_ids"_a, "seed"_a, "epoch"_a, "stream"_a, "size"_a,
      nb::sig("def sample_uniform(sample_ids: numpy.typing.NDArray[numpy.int64], seed: int, "
              "epoch: int, stream: int, size: int) -> numpy.typing.NDArray[numpy.float64]"));

  m.def("live_buffers", &OutputBuffer::live_count,
        "Batch buffers allocated by the engine and not yet freed (for tests).");
}
