#include "shardfeed/filter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <arrow/array.h>
#include <arrow/array/builder_base.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/filesystem/filesystem.h>
#include <arrow/scalar.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/statistics.h>

#include "catalog/convert.h"
#include "catalog/deletion_vector.h"
#include "catalog/unify.h"
#include "shardfeed/status.h"
#include "storage/open.h"
#include "util/parquet_error.h"
#include "util/read_properties.h"
#include "util/struct_fields.h"

namespace shardfeed {

namespace {

// The leaf column of the file's field `in_file` (structs flattened), -1 where
// the field is no single unrepeated leaf (a list's, a map's).
int FieldLeaf(const FileEntry& file, int in_file) {
  if (in_file < 0) return -1;
  const auto& pq_schema = *file.metadata->schema();
  if (!file.struct_leaves.empty()) {
    if (static_cast<size_t>(in_file) >= file.struct_leaves.size()) return -1;
    const auto& leaves = file.struct_leaves[static_cast<size_t>(in_file)];
    if (leaves.size() != 1 || leaves[0] < 0 || leaves[0] >= pq_schema.num_columns()) return -1;
    return pq_schema.Column(leaves[0])->max_repetition_level() == 0 ? leaves[0] : -1;
  }
  if (in_file >= pq_schema.group_node()->field_count()) return -1;
  return pq_schema.ColumnIndex(*pq_schema.group_node()->field(in_file));
}

namespace cp = arrow::compute;

// A predicate bound to the dataset schema.
struct Bound {
  const FilterPredicate* pred = nullptr;
  int field = -1;                              // dataset schema field
  int partition_key = -1;                      // >= 0: a partition column
  std::shared_ptr<arrow::DataType> eval_type;  // int64, uint64, float64, utf8, binary or bool
  // The column's type as delivered: each file's values are first made this
  // (units promoted, decimals to float64), so the filter sees what the batch
  // holds, whatever the file's own type.
  std::shared_ptr<arrow::DataType> read_type;
  std::vector<std::shared_ptr<arrow::Scalar>> values;
};

const char* OpName(FilterOp op) {
  switch (op) {
    case FilterOp::kEq:
      return "==";
    case FilterOp::kNe:
      return "!=";
    case FilterOp::kLt:
      return "<";
    case FilterOp::kLe:
      return "<=";
    case FilterOp::kGt:
      return ">";
    case FilterOp::kGe:
      return ">=";
    case FilterOp::kIn:
      return "in";
    case FilterOp::kNotIn:
      return "not in";
  }
  return "?";
}

// Temporal types compare as the integers they are delivered as.
std::shared_ptr<arrow::DataType> StorageInt(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::DATE32:
    case arrow::Type::TIME32:
      return arrow::int32();
    case arrow::Type::DATE64:
    case arrow::Type::TIME64:
    case arrow::Type::TIMESTAMP:
    case arrow::Type::DURATION:
      return arrow::int64();
    default:
      return nullptr;
  }
}

arrow::Result<arrow::Datum> ToEval(arrow::Datum d, const std::shared_ptr<arrow::DataType>& to) {
  if (d.type()->Equals(*to)) return d;
  if (auto storage = StorageInt(*d.type())) {
    ARROW_ASSIGN_OR_RAISE(d, cp::Cast(d, storage));
  }
  if (d.type()->Equals(*to)) return d;
  return cp::Cast(d, to);
}

arrow::Result<std::shared_ptr<arrow::DataType>> EvalType(const arrow::DataType& column,
                                                         const FilterPredicate& p) {
  bool any_double = false, all_bool = true, all_string = true, all_number = true;
  for (const auto& v : p.values) {
    any_double |= std::holds_alternative<double>(v);
    all_bool &= std::holds_alternative<bool>(v);
    all_string &= std::holds_alternative<std::string>(v);
    all_number &= std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
  }
  const arrow::DataType& t = column.id() == arrow::Type::DICTIONARY
                                 ? *static_cast<const arrow::DictionaryType&>(column).value_type()
                                 : column;
  const std::string where = "filter on column '" + p.column + "' (" + column.ToString() + "): ";
  if (t.id() == arrow::Type::BOOL) {
    if (all_bool) return arrow::boolean();
    return Error(ErrorKind::kInvalidArgument, where + "the values must be True or False");
  }
  if (arrow::is_string(t.id()) || t.id() == arrow::Type::STRING_VIEW) {
    if (all_string) return arrow::utf8();
    return Error(ErrorKind::kInvalidArgument, where + "the values must be strings");
  }
  // Bytes, compared bytewise (UTF-8 text orders so too): text some writers store
  // without the UTF8 annotation, a partition key whose values are not all text.
  if (arrow::is_binary(t.id()) || t.id() == arrow::Type::BINARY_VIEW) {
    if (all_string) return arrow::binary();
    return Error(ErrorKind::kInvalidArgument, where + "the values must be strings");
  }
  const bool integer = arrow::is_integer(t.id()) || StorageInt(t) != nullptr;
  const bool floating = arrow::is_floating(t.id()) || arrow::is_decimal(t.id());
  if (integer || floating) {
    if (!all_number) {
      return Error(ErrorKind::kInvalidArgument, where + "the values must be numbers");
    }
    if (floating || any_double) return arrow::float64();
    // uint64 as itself (its values above 2^63 have no int64); the values are
    // the int64s of the same bits (filter.h).
    return t.id() == arrow::Type::UINT64 ? arrow::uint64() : arrow::int64();
  }
  return Error(ErrorKind::kInvalidArgument, where + "this type cannot be filtered on");
}

std::shared_ptr<arrow::Scalar> MakeValue(const FilterValue& v,
                                         const std::shared_ptr<arrow::DataType>& type) {
  if (const auto* b = std::get_if<bool>(&v)) return std::make_shared<arrow::BooleanScalar>(*b);
  if (const auto* s = std::get_if<std::string>(&v)) {
    if (type->id() == arrow::Type::BINARY) return std::make_shared<arrow::BinaryScalar>(*s);
    return std::make_shared<arrow::StringScalar>(*s);
  }
  if (type->id() == arrow::Type::DOUBLE) {
    const double d = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                       : static_cast<double>(std::get<int64_t>(v));
    return std::make_shared<arrow::DoubleScalar>(d);
  }
  if (type->id() == arrow::Type::UINT64) {
    return std::make_shared<arrow::UInt64Scalar>(static_cast<uint64_t>(std::get<int64_t>(v)));
  }
  return std::make_shared<arrow::Int64Scalar>(std::get<int64_t>(v));
}

// -1 / 0 / 1 comparing two non-null scalars of one eval type.
int Compare(const arrow::Scalar& a, const arrow::Scalar& b) {
  switch (a.type->id()) {
    case arrow::Type::INT64: {
      const auto x = static_cast<const arrow::Int64Scalar&>(a).value;
      const auto y = static_cast<const arrow::Int64Scalar&>(b).value;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case arrow::Type::UINT64: {
      const auto x = static_cast<const arrow::UInt64Scalar&>(a).value;
      const auto y = static_cast<const arrow::UInt64Scalar&>(b).value;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case arrow::Type::DOUBLE: {
      const auto x = static_cast<const arrow::DoubleScalar&>(a).value;
      const auto y = static_cast<const arrow::DoubleScalar&>(b).value;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case arrow::Type::BOOL: {
      const int x = static_cast<const arrow::BooleanScalar&>(a).value;
      const int y = static_cast<const arrow::BooleanScalar&>(b).value;
      return x - y;
    }
    default: {  // utf8 or binary
      const auto x = static_cast<const arrow::BaseBinaryScalar&>(a).view();
      const auto y = static_cast<const arrow::BaseBinaryScalar&>(b).view();
      return x.compare(y) < 0 ? -1 : (x == y ? 0 : 1);
    }
  }
}

// Whether a single non-null value passes (partition values, statistics bounds).
bool ValuePasses(const Bound& b, const arrow::Scalar& x) {
  auto cmp = [&](size_t i) { return Compare(x, *b.values[i]); };
  switch (b.pred->op) {
    case FilterOp::kEq:
      return cmp(0) == 0;
    case FilterOp::kNe:
      return cmp(0) != 0;
    case FilterOp::kLt:
      return cmp(0) < 0;
    case FilterOp::kLe:
      return cmp(0) <= 0;
    case FilterOp::kGt:
      return cmp(0) > 0;
    case FilterOp::kGe:
      return cmp(0) >= 0;
    case FilterOp::kIn:
    case FilterOp::kNotIn: {
      bool found = false;
      for (size_t i = 0; i < b.values.size(); ++i) found |= cmp(i) == 0;
      return (b.pred->op == FilterOp::kIn) == found;
    }
  }
  return false;
}

// Whether some value in [lo, hi] may pass (statistics: false drops the row group).
bool RangeMayPass(const Bound& b, const arrow::Scalar& lo, const arrow::Scalar& hi) {
  auto below = [&](const arrow::Scalar& v) { return Compare(v, lo) < 0; };
  auto above = [&](const arrow::Scalar& v) { return Compare(v, hi) > 0; };
  const bool single = Compare(lo, hi) == 0;
  switch (b.pred->op) {
    case FilterOp::kEq:
      return !below(*b.values[0]) && !above(*b.values[0]);
    case FilterOp::kNe:
      return !(single && Compare(lo, *b.values[0]) == 0);
    case FilterOp::kLt:
      return Compare(lo, *b.values[0]) < 0;
    case FilterOp::kLe:
      return Compare(lo, *b.values[0]) <= 0;
    case FilterOp::kGt:
      return Compare(hi, *b.values[0]) > 0;
    case FilterOp::kGe:
      return Compare(hi, *b.values[0]) >= 0;
    case FilterOp::kIn:
      return std::any_of(b.values.begin(), b.values.end(),
                         [&](const auto& v) { return !below(*v) && !above(*v); });
    case FilterOp::kNotIn:
      return !(single && !ValuePasses(b, lo));
  }
  return true;
}

// The passing mask of one predicate over an array (null: does not pass).
arrow::Result<std::shared_ptr<arrow::BooleanArray>> ArrayPasses(const Bound& b,
                                                                const arrow::Datum& column) {
  ARROW_ASSIGN_OR_RAISE(auto delivered, ConformArray(column.make_array(), b.read_type));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum x, ToEval(arrow::Datum(delivered), b.eval_type));
  arrow::Datum mask;
  static const char* kNames[] = {"equal",      "not_equal", "less",
                                 "less_equal", "greater",   "greater_equal"};
  const auto op = b.pred->op;
  if (op == FilterOp::kIn || op == FilterOp::kNotIn) {
    std::unique_ptr<arrow::ArrayBuilder> builder;
    ARROW_RETURN_NOT_OK(arrow::MakeBuilder(arrow::default_memory_pool(), b.eval_type, &builder));
    for (const auto& v : b.values) ARROW_RETURN_NOT_OK(builder->AppendScalar(*v));
    ARROW_ASSIGN_OR_RAISE(auto set, builder->Finish());
    ARROW_ASSIGN_OR_RAISE(mask, cp::IsIn(x, cp::SetLookupOptions(set)));
    if (op == FilterOp::kNotIn) {
      ARROW_ASSIGN_OR_RAISE(mask, cp::Invert(mask));
    }
  } else {
    ARROW_ASSIGN_OR_RAISE(mask, cp::CallFunction(kNames[static_cast<int>(op)], {x, b.values[0]}));
  }
  // Comparisons give null for a null (it does not pass); "not in" is
  // not(is_in) as pyarrow computes it, so a null passes it.
  ARROW_ASSIGN_OR_RAISE(mask, cp::CallFunction("coalesce", {mask, arrow::Datum(false)}));
  return std::static_pointer_cast<arrow::BooleanArray>(mask.make_array());
}

// Which rows of a row group a predicate can let pass.
enum class Reach { kNone, kSome, kAll };

// The outcome of one row group.
struct RgOutcome {
  enum Pruned { kNone, kPartition, kStatistics } pruned = kNone;
  bool read = false;
  int64_t bytes = 0;
  int64_t pass = 0;
  int64_t deleted = 0;                        // rows that passed, left out by a deletion vector
  std::shared_ptr<arrow::BooleanArray> mask;  // set when some but not all rows pass
};

struct FilterRunner {
  const Catalog& catalog;
  std::vector<std::vector<Bound>> conj;
  // Per file, the unit of each duration field (structs flattened), read from
  // its footer's Arrow schema on first use; row groups are pruned in parallel.
  std::mutex units_mu;
  std::map<int32_t, std::vector<std::optional<arrow::TimeUnit::type>>> units;

  std::optional<arrow::TimeUnit::type> DurationUnit(int32_t f, int in_file) {
    std::lock_guard<std::mutex> lock(units_mu);
    auto it = units.find(f);
    if (it == units.end()) {
      std::vector<std::optional<arrow::TimeUnit::type>> of_file;
      const auto& metadata = catalog.files()[static_cast<size_t>(f)].metadata;
      auto manifest =
          metadata
              ? MakeManifest(*metadata)
              : arrow::Result<parquet::arrow::SchemaManifest>(arrow::Status::Invalid("no footer"));
      if (manifest.ok()) {
        for (const auto& flat : FlattenStructs(*manifest)) {
          const auto& type = flat.field->type();
          of_file.push_back(
              type->id() == arrow::Type::DURATION
                  ? std::optional(static_cast<const arrow::DurationType&>(*type).unit())
                  : std::nullopt);
        }
      }
      it = units.emplace(f, std::move(of_file)).first;
    }
    if (in_file < 0 || static_cast<size_t>(in_file) >= it->second.size()) return std::nullopt;
    return it->second[static_cast<size_t>(in_file)];
  }

  arrow::Status Bind(const FilterSpec& spec) {
    const auto& schema = *catalog.schema();
    for (const auto& and_list : spec) {
      auto& bound = conj.emplace_back();
      for (const auto& p : and_list) {
        Bound b;
        b.pred = &p;
        b.field = schema.GetFieldIndex(p.column);
        if (b.field < 0) {
          return Error(ErrorKind::kColumnNotFound,
                       "filter on column '" + p.column + "': no such column in the dataset");
        }
        const bool many = p.op == FilterOp::kIn || p.op == FilterOp::kNotIn;
        if (p.values.empty() || (!many && p.values.size() != 1)) {
          return Error(ErrorKind::kInvalidArgument, "filter on column '" + p.column + "', op '" +
                                                        OpName(p.op) + "': wrong value count");
        }
        b.partition_key = catalog.column_origins()[static_cast<size_t>(b.field)].partition_key;
        const auto& metadata = schema.field(b.field)->metadata();
        if (metadata && metadata->Contains(kConflictKey)) {
          // No type holds the column's values in every file (as when it is read).
          return Error(ErrorKind::kSchemaMismatch, "filter on column '" + p.column + "': " +
                                                       metadata->Get(kConflictKey).ValueOr(""));
        }
        b.read_type = ReadType(schema.field(b.field)->type());
        ARROW_ASSIGN_OR_RAISE(b.eval_type, EvalType(*schema.field(b.field)->type(), p));
        for (const auto& v : p.values) b.values.push_back(MakeValue(v, b.eval_type));
        bound.push_back(std::move(b));
      }
    }
    return arrow::Status::OK();
  }

  // Which rows of a row group `b` lets pass where the column is one value
  // (a partition value, or null).
  arrow::Result<Reach> ConstantPasses(const Bound& b, const std::shared_ptr<arrow::Scalar>& value) {
    if (!value || !value->is_valid) {
      return b.pred->op == FilterOp::kNotIn ? Reach::kAll : Reach::kNone;
    }
    ARROW_ASSIGN_OR_RAISE(auto x, ToEval(arrow::Datum(value), b.eval_type));
    return ValuePasses(b, *x.scalar()) ? Reach::kAll : Reach::kNone;
  }

  // kNone: no row of the row group can pass `b` (by partition value or
  // statistics); kAll: every row does (the column is one value there).
  // `footer`: the row group's, parsed on first use (RowGroupFooter).
  arrow::Result<Reach> MayPass(const Bound& b, const RowGroupEntry& rg, bool* by_partition,
                               std::shared_ptr<parquet::FileMetaData>* footer) {
    const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
    *by_partition = b.partition_key >= 0;
    if (b.partition_key >= 0) {
      return ConstantPasses(b, file.partition_values[static_cast<size_t>(b.partition_key)]);
    }
    const int in_file =
        file.field_map.empty() ? b.field : file.field_map[static_cast<size_t>(b.field)];
    if (in_file < 0) {
      // The file lacks the column: as the decoder reads it (DatasetColumn), the
      // folder's value where a partition key has its name, else nulls.
      std::shared_ptr<arrow::Scalar> value;
      const auto& keys = catalog.partition_schema();
      const int key = keys ? keys->GetFieldIndex(catalog.schema()->field(b.field)->name()) : -1;
      if (key >= 0 && static_cast<size_t>(key) < file.partition_values.size()) {
        value = file.partition_values[static_cast<size_t>(key)];
      }
      return ConstantPasses(b, value);
    }
    const int leaf = FieldLeaf(file, in_file);
    if (leaf < 0) return Reach::kSome;
    if (!*footer) {
      ARROW_ASSIGN_OR_RAISE(*footer, RowGroupFooter(rg));
    }
    auto chunk = (*footer)->RowGroup(0)->ColumnChunk(leaf);
    auto stats = chunk->statistics();
    if (!stats) return Reach::kSome;
    const bool not_in = b.pred->op == FilterOp::kNotIn;
    if (not_in && (!stats->HasNullCount() || stats->null_count() > 0)) return Reach::kSome;
    if (stats->HasNullCount() && stats->null_count() >= rg.num_rows) {
      return not_in ? Reach::kSome : Reach::kNone;
    }
    // Statistics leave NaN out of min and max, and a NaN passes != and not in:
    // a float row group whose bounds are the one value compared may hold one.
    if ((not_in || b.pred->op == FilterOp::kNe) && arrow::is_floating(b.read_type->id())) {
      return Reach::kSome;
    }
    if (!stats->HasMinMax()) return Reach::kSome;
    std::shared_ptr<arrow::Scalar> lo, hi;
    if (!parquet::arrow::StatisticsAsScalars(*stats, &lo, &hi).ok() || !lo || !hi) {
      return Reach::kSome;
    }
    // A duration's unit is only in the file's embedded Arrow schema: its
    // statistics come as plain integers of that unit.
    if (b.read_type->id() == arrow::Type::DURATION && lo->type->id() != arrow::Type::DURATION) {
      auto unit = DurationUnit(rg.file, in_file);
      if (!unit || !arrow::is_integer(lo->type->id())) return Reach::kSome;
      auto as_duration = [&](const std::shared_ptr<arrow::Scalar>& v) {
        auto wide = cp::Cast(arrow::Datum(v), arrow::int64());
        if (!wide.ok() || !wide->scalar()->is_valid) return std::shared_ptr<arrow::Scalar>();
        const int64_t n = static_cast<const arrow::Int64Scalar&>(*wide->scalar()).value;
        return std::static_pointer_cast<arrow::Scalar>(
            std::make_shared<arrow::DurationScalar>(n, *unit));
      };
      lo = as_duration(lo);
      hi = as_duration(hi);
      if (!lo || !hi) return Reach::kSome;
    }
    // The bounds in the file's type, as delivered (units, decimals), then compared.
    auto as_delivered =
        [&](const std::shared_ptr<arrow::Scalar>& v) -> arrow::Result<arrow::Datum> {
      ARROW_ASSIGN_OR_RAISE(auto one, arrow::MakeArrayFromScalar(*v, 1));
      ARROW_ASSIGN_OR_RAISE(auto delivered, ConformArray(one, b.read_type));
      ARROW_ASSIGN_OR_RAISE(auto scalar, delivered->GetScalar(0));
      return ToEval(arrow::Datum(scalar), b.eval_type);
    };
    auto lo_eval = as_delivered(lo);
    auto hi_eval = as_delivered(hi);
    if (!lo_eval.ok() || !hi_eval.ok()) return Reach::kSome;
    const auto& l = *lo_eval->scalar();
    const auto& h = *hi_eval->scalar();
    if (b.eval_type->id() == arrow::Type::DOUBLE &&
        (std::isnan(static_cast<const arrow::DoubleScalar&>(l).value) ||
         std::isnan(static_cast<const arrow::DoubleScalar&>(h).value))) {
      return Reach::kSome;
    }
    return RangeMayPass(b, l, h) ? Reach::kSome : Reach::kNone;
  }

  arrow::Result<std::shared_ptr<arrow::BooleanArray>> ReadAndEvaluate(
      const RowGroupEntry& rg, const std::vector<std::vector<const Bound*>>& alive,
      RgOutcome* out) {
    const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
    std::vector<int> fields, in_files, leaves;
    for (const auto& c : alive) {
      for (const Bound* b : c) {
        if (std::find(fields.begin(), fields.end(), b->field) != fields.end()) continue;
        fields.push_back(b->field);
        const int in_file =
            file.field_map.empty() ? b->field : file.field_map[static_cast<size_t>(b->field)];
        const int leaf = FieldLeaf(file, in_file);
        if (leaf < 0) {  // MayPass evaluates such columns without reading them
          return Error(ErrorKind::kUnsupportedType,
                       "filter on column '" + b->pred->column + "': not a column of this file");
        }
        leaves.push_back(leaf);
        in_files.push_back(in_file);
      }
    }
    // Through a read tracker (remote reads retried), so that a failed read
    // is a StorageError and bytes that do not decode an InvalidDataError.
    ARROW_ASSIGN_OR_RAISE(auto opened, OpenCatalogFile(catalog, rg.file, nullptr));
    auto failed = [&](const arrow::Status& status) { return opened.failure->Classify(status, {}); };
    std::shared_ptr<arrow::Table> table;
    std::shared_ptr<parquet::FileMetaData> footer;
    try {
      ARROW_ASSIGN_OR_RAISE(footer, RowGroupFooter(rg));
      auto pq = parquet::ParquetFileReader::Open(opened.file, parquet::default_reader_properties(),
                                                 footer);
      parquet::ArrowReaderProperties props = ArrowReadDefaults();
      props.set_use_threads(false);
      props.set_batch_size(std::max<int64_t>(rg.num_rows, 1));
      auto reader =
          parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), props);
      if (!reader.ok()) return failed(reader.status());
      const auto flat = FlattenStructs((*reader)->manifest());  // what in_file counts
      std::vector<const FlatField*> read_fields;
      for (int in_file : in_files) {
        if (static_cast<size_t>(in_file) >= flat.size()) {
          return Error(ErrorKind::kInvalidData, "the file has fewer columns than its footer said");
        }
        read_fields.push_back(&flat[static_cast<size_t>(in_file)]);
      }
      auto read = ReadFlatFields(**reader, 0, read_fields);  // the footer's only row group
      if (!read.ok()) return failed(read.status());
      table = *read;
    } catch (...) {
      return failed(ParquetExceptionStatus(std::current_exception(), {}, IoOutcome::kReadOk));
    }
    if (table->num_rows() != rg.num_rows) {
      return Error(ErrorKind::kInvalidData, "decoded " + std::to_string(table->num_rows()) +
                                                " rows, the footer says " +
                                                std::to_string(rg.num_rows));
    }
    auto meta = footer->RowGroup(0);
    for (int leaf : leaves) out->bytes += meta->ColumnChunk(leaf)->total_compressed_size();
    out->read = true;
    arrow::Datum any;
    for (const auto& c : alive) {
      arrow::Datum all;
      for (const Bound* b : c) {
        const auto pos = std::find(fields.begin(), fields.end(), b->field) - fields.begin();
        ARROW_ASSIGN_OR_RAISE(auto column,
                              arrow::Concatenate(table->column(static_cast<int>(pos))->chunks()));
        ARROW_ASSIGN_OR_RAISE(auto mask, ArrayPasses(*b, arrow::Datum(column)));
        if (all.is_value()) {
          ARROW_ASSIGN_OR_RAISE(all, cp::And(all, arrow::Datum(mask)));
        } else {
          all = arrow::Datum(mask);
        }
      }
      if (any.is_value()) {
        ARROW_ASSIGN_OR_RAISE(any, cp::Or(any, all));
      } else {
        any = all;
      }
    }
    return std::static_pointer_cast<arrow::BooleanArray>(any.make_array());
  }

  // Drops the rows of `rg` (its first row is row `file_row` of its file) that
  // the file's deletion vector deletes.
  arrow::Status ApplyDeletions(const RowGroupEntry& rg, int64_t file_row, RgOutcome* out) {
    const auto& deleted = catalog.files()[static_cast<size_t>(rg.file)].deleted;
    if (!deleted || out->pass == 0) return arrow::Status::OK();
    const auto live = LiveRuns(deleted.get(), file_row, file_row + rg.num_rows);
    if (live.size() == 1 && live[0].end - live[0].begin == rg.num_rows) {
      return arrow::Status::OK();  // none of its rows deleted
    }
    std::vector<bool> keep(static_cast<size_t>(rg.num_rows), false);
    int64_t kept = 0;
    for (const auto& run : live) {
      for (int64_t r = run.begin - file_row; r < run.end - file_row; ++r) {
        const bool passes = !out->mask || (out->mask->IsValid(r) && out->mask->Value(r));
        keep[static_cast<size_t>(r)] = passes;
        kept += passes;
      }
    }
    out->deleted = out->pass - kept;
    out->pass = kept;
    out->mask.reset();
    if (out->pass == 0) return arrow::Status::OK();
    arrow::BooleanBuilder builder;
    ARROW_RETURN_NOT_OK(builder.AppendValues(keep));
    ARROW_ASSIGN_OR_RAISE(auto mask, builder.Finish());
    out->mask = std::static_pointer_cast<arrow::BooleanArray>(mask);
    return arrow::Status::OK();
  }

  arrow::Result<RgOutcome> RowGroup(int32_t index, int64_t file_row) {
    ARROW_ASSIGN_OR_RAISE(RgOutcome out, Evaluate(index));
    ARROW_RETURN_NOT_OK(
        ApplyDeletions(catalog.row_groups()[static_cast<size_t>(index)], file_row, &out));
    return out;
  }

  // The row group's outcome under the filter alone (every row without one).
  arrow::Result<RgOutcome> Evaluate(int32_t index) {
    const auto& rg = catalog.row_groups()[static_cast<size_t>(index)];
    RgOutcome out;
    if (conj.empty()) {  // no filter: only deletion vectors select rows
      out.pass = rg.num_rows;
      return out;
    }
    std::vector<std::vector<const Bound*>> alive;
    bool all_by_partition = true, everything = false;
    std::shared_ptr<parquet::FileMetaData> footer;
    for (const auto& c : conj) {
      std::vector<const Bound*> rest;
      bool dead = false, by_partition = false;
      for (const auto& b : c) {
        ARROW_ASSIGN_OR_RAISE(const Reach reach, MayPass(b, rg, &by_partition, &footer));
        if (reach == Reach::kNone) {
          dead = true;
          break;
        }
        if (reach == Reach::kSome) rest.push_back(&b);
      }
      if (dead) {
        all_by_partition &= by_partition;
        continue;
      }
      everything |= rest.empty();
      alive.push_back(std::move(rest));
    }
    if (alive.empty()) {
      out.pruned = all_by_partition ? RgOutcome::kPartition : RgOutcome::kStatistics;
      return out;
    }
    if (everything) {
      out.pass = rg.num_rows;
      return out;
    }
    ARROW_ASSIGN_OR_RAISE(auto mask, ReadAndEvaluate(rg, alive, &out));
    for (int64_t i = 0; i < mask->length(); ++i) out.pass += mask->IsValid(i) && mask->Value(i);
    if (out.pass > 0 && out.pass < rg.num_rows) out.mask = std::move(mask);
    return out;
  }
};

}  // namespace

arrow::Result<std::shared_ptr<const FilteredRows>> FilteredRows::Make(const Catalog& catalog,
                                                                      const FilterSpec& spec,
                                                                      std::string key,
                                                                      int num_threads) {
  // Arrow >= 21 registers its compute kernels on request; once per process.
  static const arrow::Status compute_ready = cp::Initialize();
  ARROW_RETURN_NOT_OK(compute_ready);
  FilterRunner runner{catalog, {}, {}, {}};
  ARROW_RETURN_NOT_OK(runner.Bind(spec));
  const auto n = catalog.row_groups().size();
  // Each row group's first row in its file: where its deletion vector rows start.
  std::vector<int64_t> file_rows(n, 0);
  for (size_t i = 1; i < n; ++i) {
    const auto& previous = catalog.row_groups()[i - 1];
    if (previous.file == catalog.row_groups()[i].file) {
      file_rows[i] = file_rows[i - 1] + previous.num_rows;
    }
  }
  std::vector<arrow::Result<RgOutcome>> results(n, arrow::Status::Cancelled("unread"));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      results[i] = runner.RowGroup(static_cast<int32_t>(i), file_rows[i]);
    }
  };
  const size_t nthreads = std::min<size_t>(n, static_cast<size_t>(std::max(1, num_threads)));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();

  auto rows = std::shared_ptr<FilteredRows>(new FilteredRows());
  rows->key_ = std::move(key);
  auto& c = rows->counts_;
  c.files = static_cast<int64_t>(catalog.files().size());
  c.row_groups = static_cast<int64_t>(n);
  std::vector<bool> file_alive(catalog.files().size(), false);
  rows->kind_.assign(n, 0);
  rows->indices_.resize(n);
  rows->bitmaps_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& rg = catalog.row_groups()[i];
    const std::string context = "filter: file '" +
                                catalog.files()[static_cast<size_t>(rg.file)].rel_path +
                                "', row group " + std::to_string(rg.row_group);
    if (!results[i].ok()) return WithContext(results[i].status(), context);
    RgOutcome& o = *results[i];
    c.rows += rg.num_rows;
    rows->num_rows_.push_back(rg.num_rows);
    rows->pass_rows_.push_back(o.pass);
    c.rows_kept += o.pass;
    c.bytes_read += o.bytes;
    c.row_groups_read += o.read;
    c.row_groups_kept += o.pass > 0;
    if (o.pruned != RgOutcome::kPartition) file_alive[static_cast<size_t>(rg.file)] = true;
    if (o.pruned == RgOutcome::kPartition) {
      ++c.row_groups_pruned_by_partition;
      c.rows_pruned_by_partition += rg.num_rows;
    } else if (o.pruned == RgOutcome::kStatistics) {
      ++c.row_groups_pruned_by_statistics;
      c.rows_pruned_by_statistics += rg.num_rows;
    } else {
      c.rows_pruned_by_rows += rg.num_rows - o.pass - o.deleted;
      c.rows_deleted += o.deleted;
    }
    if (!o.mask) continue;
    if (o.pass * 32 < rg.num_rows) {
      rows->kind_[i] = 1;
      for (int64_t r = 0; r < rg.num_rows; ++r) {
        if (o.mask->IsValid(r) && o.mask->Value(r)) {
          rows->indices_[i].push_back(static_cast<uint32_t>(r));
        }
      }
    } else {
      rows->kind_[i] = 2;
      rows->bitmaps_[i].assign(static_cast<size_t>((rg.num_rows + 7) / 8), 0);
      for (int64_t r = 0; r < rg.num_rows; ++r) {
        if (o.mask->IsValid(r) && o.mask->Value(r)) {
          rows->bitmaps_[i][static_cast<size_t>(r / 8)] |= static_cast<uint8_t>(1u << (r % 8));
        }
      }
    }
  }
  c.files_pruned_by_partition = std::count(file_alive.begin(), file_alive.end(), false);
  return std::shared_ptr<const FilteredRows>(std::move(rows));
}

arrow::Status FilteredRows::Check(const Catalog& catalog, const FilterSpec& spec) {
  FilterRunner runner{catalog, {}, {}, {}};
  return runner.Bind(spec);
}

bool FilteredRows::All(int32_t rg) const {
  const auto i = static_cast<size_t>(rg);
  return pass_rows_[i] == num_rows_[i];
}

std::vector<int64_t> FilteredRows::Rows(int32_t rg) const {
  const auto i = static_cast<size_t>(rg);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(pass_rows_[i]));
  if (kind_[i] == 1) {
    out.assign(indices_[i].begin(), indices_[i].end());
  } else if (kind_[i] == 2) {
    for (int64_t r = 0; r < num_rows_[i]; ++r) {
      if (bitmaps_[i][static_cast<size_t>(r / 8)] >> (r % 8) & 1) out.push_back(r);
    }
  } else if (pass_rows_[i] == num_rows_[i]) {
    for (int64_t r = 0; r < num_rows_[i]; ++r) out.push_back(r);
  }
  return out;
}

}  // namespace shardfeed
