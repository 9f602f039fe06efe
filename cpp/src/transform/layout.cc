#include "transform/layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>

#include "catalog/convert.h"
#include "catalog/unify.h"
#include "shardfeed/status.h"
#include "transform/stack.h"
#include "transform/transform.h"
#include "util/string_array.h"

namespace shardfeed {

namespace {

// pandas writes an unnamed index (one left by filtering or sorting a frame) as
// a column __index_level_N__: the frame's row labels, not data.  Every column
// but those; named explicitly, they are read like any other.
bool IsPandasIndex(const std::string& name) {
  constexpr std::string_view kPrefix = "__index_level_", kSuffix = "__";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return false;
  }
  const auto digits =
      std::string_view(name).substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

constexpr char kSupported[] =
    "supported: bool, integers, floats, dates, times, timestamps, durations, decimals, and "
    "fixed-size or variable-length lists of those, also as fields of structs ('s.a')";

// The transforms that take strings, spelled for `column`, for error hints.
std::string StringTransforms(const std::string& column) {
  return "HashBucket(\"" + column + "\", num_buckets=...) or Vocabulary(\"" + column +
         "\", values=...)";
}

const char* UnitName(arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND:
      return "s";
    case arrow::TimeUnit::MILLI:
      return "ms";
    case arrow::TimeUnit::MICRO:
      return "us";
    case arrow::TimeUnit::NANO:
      return "ns";
  }
  return "";
}

// Each field's null fill (the per-column value, else the scalar), checked
// against the field's type after its transforms: nulls are filled there.
arrow::Status SetFillValues(const OutputOptions& options, Layout* layout) {
  for (const auto& [column, value] : options.fill_null_columns) {
    const auto& names = layout->field_names;
    if (std::find(names.begin(), names.end(), column) == names.end()) {
      return Error(ErrorKind::kInvalidArgument,
                   "fill_null: column '" + column + "' is not among the outputs");
    }
  }
  for (size_t i = 0; i < layout->fields.size(); ++i) {
    std::optional<double> fill = options.fill_null;
    auto it = options.fill_null_columns.find(layout->field_names[i]);
    if (it != options.fill_null_columns.end()) fill = it->second;
    if (fill) {
      ARROW_RETURN_NOT_OK(CheckFillValue(*fill, layout->field_dtypes[i],
                                         "fill_null for column '" + layout->field_names[i] + "'"));
    }
    layout->field_fill_null.push_back(fill);
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<DType> ValueDType(const arrow::DataType& type, const std::string& column) {
  switch (type.id()) {
    case arrow::Type::BOOL:
      return DType::kBool;
    case arrow::Type::INT8:
      return DType::kInt8;
    case arrow::Type::INT16:
      return DType::kInt16;
    case arrow::Type::INT32:
      return DType::kInt32;
    case arrow::Type::INT64:
      return DType::kInt64;
    case arrow::Type::UINT8:
      return DType::kUInt8;
    case arrow::Type::UINT16:
      return DType::kUInt16;
    case arrow::Type::UINT32:
      return DType::kUInt32;
    case arrow::Type::UINT64:
      return DType::kUInt64;
    case arrow::Type::HALF_FLOAT:
      return DType::kFloat16;
    case arrow::Type::FLOAT:
      return DType::kFloat32;
    case arrow::Type::DOUBLE:
      return DType::kFloat64;
    // Times as the integers Arrow stores them: days (date64 is read as date32),
    // or counts of the type's unit since the epoch in UTC (or since midnight).
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
    case arrow::Type::TIME32:
      return DType::kInt32;
    case arrow::Type::TIMESTAMP:
    case arrow::Type::TIME64:
    case arrow::Type::DURATION:
      return DType::kInt64;
    case arrow::Type::DECIMAL32:
    case arrow::Type::DECIMAL64:
    case arrow::Type::DECIMAL128:
    case arrow::Type::DECIMAL256:
      return DType::kFloat64;  // the nearest double
    case arrow::Type::DICTIONARY:
      return ValueDType(*static_cast<const arrow::DictionaryType&>(type).value_type(), column);
    default: {
      std::string hint = std::string(" (") + kSupported + "); leave it out with columns=[...]";
      const auto* values = &type;
      if (type.id() == arrow::Type::DICTIONARY) {
        values = static_cast<const arrow::DictionaryType&>(type).value_type().get();
      }
      if (IsStringLike(values->id())) {
        hint = "; strings are accepted by HashBucket and Vocabulary: map it to ids with " +
               StringTransforms(column) + ", or leave it out with columns=";
      }
      return Error(ErrorKind::kUnsupportedType, "column '" + column + "' has type " +
                                                    type.ToString() +
                                                    ", which cannot become a tensor" + hint);
    }
  }
}

namespace {

// Adds each column a layout reads once, with its shape, transform chain and
// types; later requests for the same column return the same field.
class FieldResolver {
 public:
  FieldResolver(const arrow::Schema& schema, const OutputOptions& options, Layout* layout)
      : schema_(schema), options_(options), layout_(*layout) {}

  arrow::Result<int> Need(const std::string& name) {
    auto it = decoded_.find(name);
    if (it != decoded_.end()) return it->second;
    const int field = schema_.GetFieldIndex(name);
    if (field < 0) {
      if (schema_.GetFieldByName(name) == nullptr) {
        // A struct (a list of structs, a map) is its fields, named by their path.
        std::string fields;
        int count = 0;
        for (const auto& f : schema_.fields()) {
          if (f->name().size() <= name.size() + 1 || f->name().compare(0, name.size(), name) != 0 ||
              f->name()[name.size()] != '.') {
            continue;
          }
          if (count++ < 8) fields += (fields.empty() ? "'" : ", '") + f->name() + "'";
        }
        if (count > 0) {
          return Error(ErrorKind::kColumnNotFound,
                       "column '" + name +
                           "' is a struct, a list of structs or a map, whose fields are columns "
                           "of their own, named by their path: " +
                           fields + (count > 8 ? ", ..." : ""));
        }
        std::string names;
        for (int i = 0; i < std::min(schema_.num_fields(), 8); ++i) {
          names += (i ? ", " : "") + schema_.field(i)->name();
        }
        if (schema_.num_fields() > 8) names += ", ...";
        return Error(ErrorKind::kColumnNotFound,
                     "column '" + name + "' is not in the dataset (columns: " + names + ")");
      }
      return Error(ErrorKind::kInvalidArgument, "column name '" + name + "' is ambiguous");
    }
    const auto& metadata = schema_.field(field)->metadata();
    if (metadata && metadata->Contains(kConflictKey)) {
      // Types that differ across files matter only for the columns in use.
      return Error(ErrorKind::kSchemaMismatch, metadata->Get(kConflictKey).ValueOr(""));
    }
    const auto& type = *schema_.field(field)->type();
    ColumnShape shape = ColumnShape::kScalar;
    const arrow::DataType* value_type = &type;
    if (IsListType(type.id())) {
      shape =
          type.id() == arrow::Type::FIXED_SIZE_LIST ? ColumnShape::kFixedList : ColumnShape::kList;
      value_type = static_cast<const arrow::BaseListType&>(type).value_type().get();
      if (IsListType(value_type->id())) {
        return Error(ErrorKind::kUnsupportedType, "column '" + name + "' has type " +
                                                      type.ToString() +
                                                      ": nested lists are not supported");
      }
    }
    // Transforms on this column, in list order; they decide its final type.
    std::vector<size_t> chain;
    for (size_t t = 0; t < options_.transforms.size(); ++t) {
      if (options_.transforms[t].column == name) chain.push_back(t);
    }
    if (value_type->id() == arrow::Type::DICTIONARY) {
      value_type = static_cast<const arrow::DictionaryType&>(*value_type).value_type().get();
    }
    // Strings become hashes (StringHash64) when their first transform takes
    // strings; dictionaries (pandas and polars categoricals) too, and the
    // elements of lists of them (tags, histories: a list of ids per row).
    const bool from_strings = IsStringLike(value_type->id()) && !chain.empty() &&
                              (options_.transforms[chain[0]].op == TransformOp::kHashBucket ||
                               options_.transforms[chain[0]].op == TransformOp::kVocabulary);
    DType raw = DType::kUInt64;  // string hashes
    if (!from_strings) {
      auto maybe_raw = ValueDType(*value_type, name);
      if (!maybe_raw.ok() && shape != ColumnShape::kScalar && IsStringLike(value_type->id())) {
        return Error(ErrorKind::kUnsupportedType,
                     "column '" + name + "' has type " + type.ToString() +
                         ": its elements are strings; map them to ids with " +
                         StringTransforms(name) + ", or leave it out with columns=[...]");
      }
      if (!maybe_raw.ok() && shape != ColumnShape::kScalar) {
        // Say it of the list, whose elements no transform maps.
        return Error(ErrorKind::kUnsupportedType,
                     "column '" + name + "' has type " + type.ToString() + ": its elements (" +
                         value_type->ToString() + ") cannot become a tensor (" + kSupported +
                         "); leave it out with columns=[...]");
      }
      ARROW_ASSIGN_OR_RAISE(raw, std::move(maybe_raw));
      if (value_type != &type && type.id() == arrow::Type::DICTIONARY) {
        return Error(ErrorKind::kUnsupportedType,
                     "column '" + name + "' has type " + type.ToString() +
                         ": dictionary-encoded numbers are not supported");
      }
    }
    DType dtype = raw;
    bool strings = from_strings;
    for (size_t t : chain) {
      ARROW_ASSIGN_OR_RAISE(dtype, TransformedType(options_.transforms[t], dtype, shape, strings));
      strings = false;
    }
    const int index = static_cast<int>(layout_.fields.size());
    layout_.fields.push_back(field);
    layout_.field_names.push_back(name);
    layout_.field_dtypes.push_back(dtype);
    layout_.field_raw_dtypes.push_back(raw);
    layout_.field_shapes.push_back(shape);
    layout_.field_from_strings.push_back(from_strings);
    layout_.field_transforms.push_back(std::move(chain));
    decoded_.emplace(name, index);
    return index;
  }

  bool has(const std::string& name) const { return decoded_.count(name) > 0; }

 private:
  const arrow::Schema& schema_;
  const OutputOptions& options_;
  Layout& layout_;
  std::map<std::string, int> decoded_;  // column name -> index into layout_.fields
};

// What kind of time a type counts ("timestamp", "duration", "time", "date"), or "".
std::string TimeKind(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::TIMESTAMP:
      return "timestamp";
    case arrow::Type::DURATION:
      return "duration";
    case arrow::Type::TIME32:
    case arrow::Type::TIME64:
      return "time";
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
      return "date";
    default:
      return "";
  }
}

// Whether a field's values still count its time unit after its transforms: its type
// unchanged (Standardize makes floats), and no ids made of them (HashBucket, Bucketize).
bool KeepsUnit(const Layout& layout, size_t field) {
  if (layout.field_raw_dtypes[field] != layout.field_dtypes[field]) return false;
  return std::none_of(layout.field_transforms[field].begin(), layout.field_transforms[field].end(),
                      [&](size_t t) {
                        const auto op = layout.transforms[t].op;
                        return op == TransformOp::kHashBucket || op == TransformOp::kBucketize ||
                               op == TransformOp::kVocabulary;
                      });
}

// A stack's one time unit: every column is a time of one kind, still counting its
// unit (KeepsUnit; the stack has no transforms of its own), in one unit; "" else.
// *conflict, when given, names two columns of one kind of time (in any order, whatever
// else the stack holds) counting different units: ms beside ns read as one scale.
std::string StackUnit(const arrow::Schema& schema, const Layout& layout, const OutputPlan& out,
                      const std::vector<std::string>& names, std::string* conflict) {
  if (!out.transforms.empty() || !out.fill.empty()) return "";
  std::map<std::string, std::pair<std::string, size_t>> first;  // kind -> (unit, column)
  bool one = true;  // every column a time of one kind and unit
  for (size_t k = 0; k < out.sources.size(); ++k) {
    const auto source = static_cast<size_t>(out.sources[k]);
    const auto& type = *schema.field(layout.fields[source])->type();
    const std::string kind = TimeKind(type);
    if (kind.empty() || !KeepsUnit(layout, source)) {
      one = false;
      continue;
    }
    const std::string unit = TimeUnitName(type);
    const auto [at, fresh] = first.emplace(kind, std::pair(unit, k));
    if (fresh) continue;
    if (at->second.first != unit) {
      one = false;
      if (conflict && conflict->empty()) {
        *conflict = "column '" + names[at->second.second] + "' counts " + at->second.first +
                    " and column '" + names[k] + "' counts " + unit;
      }
    }
  }
  if (!one || first.size() != 1) return "";
  return first.begin()->second.first;
}

// One stack's output: the columns' common dtype (else float32, or float64 if
// any column is float64; float16 only with float16).
arrow::Result<OutputPlan> StackOutput(const arrow::Schema& schema, const StackSpec& stack,
                                      FieldResolver* fields, Layout* layout,
                                      std::set<std::string>* stacked) {
  if (stack.columns.empty()) {
    return Error(ErrorKind::kInvalidArgument, "stack '" + stack.name + "' has no columns");
  }
  OutputPlan out;
  out.name = stack.name;
  out.kind = OutputKind::kStack;
  out.width = static_cast<int64_t>(stack.columns.size());
  bool same = true, any_f64 = false, any_f16 = false;
  for (const auto& column : stack.columns) {
    ARROW_ASSIGN_OR_RAISE(int index, fields->Need(column));
    const auto& type = *schema.field(layout->fields[static_cast<size_t>(index)])->type();
    if (IsListType(type.id())) {
      return Error(ErrorKind::kUnsupportedType, "stack '" + stack.name + "': column '" + column +
                                                    "' is a list; only scalar "
                                                    "numeric columns can be stacked");
    }
    const DType dtype = layout->field_dtypes[static_cast<size_t>(index)];
    if (!out.sources.empty() &&
        dtype != layout->field_dtypes[static_cast<size_t>(out.sources[0])]) {
      same = false;
    }
    any_f64 |= dtype == DType::kFloat64;
    any_f16 |= dtype == DType::kFloat16;
    out.sources.push_back(index);
    stacked->insert(column);
  }
  if (same) {
    out.dtype = layout->field_dtypes[static_cast<size_t>(out.sources[0])];
  } else if (any_f16) {
    return Error(ErrorKind::kUnsupportedType, "stack '" + stack.name +
                                                  "': float16 columns can only be stacked with "
                                                  "float16 columns");
  } else {
    out.dtype = any_f64 ? DType::kFloat64 : DType::kFloat32;
  }
  return out;
}

// The stack's own transforms (those whose column is the stack's name): its
// FillNull, then the rest in list order, which decide the stack's dtype.
arrow::Status StackTransforms(const arrow::Schema& schema, const OutputOptions& options,
                              const StackSpec& stack, OutputPlan* plan) {
  plan->matrix_dtype = plan->dtype;
  for (size_t t = 0; t < options.transforms.size(); ++t) {
    const auto& spec = options.transforms[t];
    if (spec.column != stack.name) continue;
    const std::string what = std::string(TransformOpName(spec.op)) + " on '" + stack.name + "'";
    if (schema.GetFieldIndex(stack.name) >= 0) {
      return Error(ErrorKind::kInvalidArgument,
                   what + ": '" + stack.name +
                       "' names both a stack and a column of the dataset; rename the stack");
    }
    if (spec.op == TransformOp::kFillNull) {
      if (!plan->transforms.empty() || !plan->fill.empty()) {
        return Error(ErrorKind::kInvalidArgument,
                     what +
                         ": a stack's FillNull fills its columns' nulls as the stack is "
                         "built, so it must come first among the stack's transforms");
      }
      ARROW_ASSIGN_OR_RAISE(plan->fill,
                            StackFillValues(spec, plan->matrix_dtype, stack.name, stack.columns));
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(plan->dtype,
                          StackTransformedType(spec, plan->dtype, stack.name, stack.columns));
    plan->transforms.push_back(t);
  }
  return arrow::Status::OK();
}

// Per-column settings given to a column (stacks take them, columns do not).
arrow::Status CheckColumnSettings(const OutputOptions& options,
                                  const std::set<std::string>& stack_names) {
  for (const auto& t : options.transforms) {
    if (stack_names.count(t.column) || (t.a_values.empty() && t.b_values.empty())) continue;
    return Error(ErrorKind::kInvalidArgument,
                 std::string(TransformOpName(t.op)) + " on column '" + t.column +
                     "': per-feature settings (lists) need a stack; a column takes one value");
  }
  return arrow::Status::OK();
}

// A field's nulls go on to its stacks' FillNull when every output that reads
// it is a stack with a FillNull.
void SetNullsToStack(Layout* layout) {
  layout->field_nulls_to_stack.assign(layout->fields.size(), false);
  std::vector<int> stacks_with_fill(layout->fields.size(), 0);
  std::vector<int> readers(layout->fields.size(), 0);
  for (const auto& out : layout->outputs) {
    for (int source : out.sources) {
      ++readers[static_cast<size_t>(source)];
      if (out.kind == OutputKind::kStack && !out.fill.empty()) {
        ++stacks_with_fill[static_cast<size_t>(source)];
      }
    }
  }
  for (size_t i = 0; i < layout->fields.size(); ++i) {
    layout->field_nulls_to_stack[i] = readers[i] > 0 && readers[i] == stacks_with_fill[i];
  }
}

}  // namespace

arrow::Result<Layout> MakeLayout(const arrow::Schema& schema, const OutputOptions& options) {
  Layout layout;
  layout.transforms = options.transforms;  // (what field_transforms index)
  FieldResolver fields(schema, options, &layout);

  std::map<std::string, std::string> names;  // output name -> what it holds
  auto add_name = [&](const std::string& name, const std::string& what) -> arrow::Status {
    const auto [at, fresh] = names.emplace(name, what);
    if (!fresh) {
      return Error(ErrorKind::kInvalidArgument,
                   "output name '" + name + "' is used twice: by " + at->second + " and by " +
                       what + "; leave one out with columns=[...] or name the stack otherwise");
    }
    return arrow::Status::OK();
  };

  // Stacks first: with all columns requested, stacked columns are not repeated alone.
  std::set<std::string> stacked, stack_names;
  std::vector<OutputPlan> stack_outputs;
  for (const auto& stack : options.stacks) {
    ARROW_ASSIGN_OR_RAISE(auto out, StackOutput(schema, stack, &fields, &layout, &stacked));
    ARROW_RETURN_NOT_OK(StackTransforms(schema, options, stack, &out));
    // Timestamps in ms beside ones in ns would read as one scale.
    std::string conflict;
    StackUnit(schema, layout, out, stack.columns, &conflict);
    if (!conflict.empty()) {
      return Error(ErrorKind::kInvalidArgument,
                   "stack '" + stack.name + "': " + conflict +
                       "; one stack of times counts one unit (stack them apart, or give the "
                       "stack a transform that makes them plain numbers, as Standardize does)");
    }
    stack_outputs.push_back(std::move(out));
    stack_names.insert(stack.name);
  }
  ARROW_RETURN_NOT_OK(CheckColumnSettings(options, stack_names));

  std::vector<std::string> columns = options.columns;
  if (options.all_columns) {
    columns.clear();
    for (const auto& field : schema.fields()) {
      if (!stacked.count(field->name()) && !IsPandasIndex(field->name())) {
        columns.push_back(field->name());
      }
    }
  }
  for (const auto& column : columns) {
    ARROW_ASSIGN_OR_RAISE(int index, fields.Need(column));
    const auto& type = *schema.field(layout.fields[static_cast<size_t>(index)])->type();
    OutputPlan out;
    out.name = column;
    out.sources = {index};
    out.dtype = layout.field_dtypes[static_cast<size_t>(index)];
    if (type.id() == arrow::Type::FIXED_SIZE_LIST) {
      out.kind = OutputKind::kFixedList;
      out.width = static_cast<const arrow::FixedSizeListType&>(type).list_size();
      // (Read from a footer's types: its product must be the width, without overflow.)
      auto shape = FixedShape(*schema.field(layout.fields[static_cast<size_t>(index)]));
      int64_t values = 1;
      bool fits = true;
      for (const int64_t d : shape) fits = fits && !__builtin_mul_overflow(values, d, &values);
      if (!shape.empty() && fits && values == out.width) out.inner_shape = std::move(shape);
    } else if (IsListType(type.id())) {
      out.kind = OutputKind::kList;
      ARROW_RETURN_NOT_OK(
          add_name(column + "_lengths", "the lengths of list column '" + column + "'"));
    }
    ARROW_RETURN_NOT_OK(add_name(column, "column '" + column + "'"));
    layout.outputs.push_back(std::move(out));
  }
  for (auto& out : stack_outputs) {
    ARROW_RETURN_NOT_OK(add_name(out.name, "stack '" + out.name + "'"));
    layout.outputs.push_back(std::move(out));
  }
  if (options.with_sample_id) {
    ARROW_RETURN_NOT_OK(add_name("sample_id", "the sample ids (with_sample_id)"));
    OutputPlan out;
    out.name = "sample_id";
    out.kind = OutputKind::kSampleId;
    out.dtype = DType::kInt64;
    layout.outputs.push_back(std::move(out));
  }
  for (const auto& t : options.transforms) {
    if (!fields.has(t.column) && !stack_names.count(t.column)) {
      if (schema.GetFieldIndex(t.column) < 0) {
        return Error(ErrorKind::kColumnNotFound, std::string(TransformOpName(t.op)) + ": column '" +
                                                     t.column + "' is not in the dataset");
      }
      return Error(ErrorKind::kInvalidArgument,
                   std::string(TransformOpName(t.op)) + ": column '" + t.column +
                       "' is not among the outputs (add it to columns or a stack)");
    }
  }
  ARROW_RETURN_NOT_OK(SetFillValues(options, &layout));
  SetNullsToStack(&layout);
  layout.field_used_alone.assign(layout.fields.size(), false);
  for (const auto& out : layout.outputs) {
    if (out.kind == OutputKind::kStack) continue;
    for (int source : out.sources) layout.field_used_alone[static_cast<size_t>(source)] = true;
  }
  if (layout.outputs.empty() && options.all_columns && options.stacks.empty()) {
    // Nothing asked for by name: the data holds nothing to hand out.
    return Error(ErrorKind::kInvalidData,
                 schema.num_fields() == 0
                     ? "the dataset has no columns: its files hold none, so there is nothing "
                       "to load"
                     : "the dataset has no columns to hand out: only pandas' index columns "
                       "(__index_level_N__), which are left out unless named in columns=");
  }
  if (layout.outputs.empty()) {
    return Error(ErrorKind::kInvalidArgument,
                 "no columns selected: columns=[] and no stack (name the columns to load)");
  }
  return layout;
}

size_t DeterministicPrefix(const Layout& layout, size_t field) {
  size_t n = 0;
  for (size_t t : layout.field_transforms[field]) {
    if (IsRandom(layout.transforms[t].op)) break;
    ++n;
  }
  return n;
}

bool MembersDeterministic(const Layout& layout, const OutputPlan& plan) {
  for (int s : plan.sources) {
    const auto f = static_cast<size_t>(s);
    if (DeterministicPrefix(layout, f) != layout.field_transforms[f].size()) return false;
  }
  return true;
}

arrow::Result<std::vector<OutputInfo>> DescribeOutputs(const arrow::Schema& schema,
                                                       const OutputOptions& options) {
  ARROW_ASSIGN_OR_RAISE(Layout layout, MakeLayout(schema, options));
  std::vector<OutputInfo> infos;
  for (const auto& out : layout.outputs) {
    OutputInfo info{out.name, out.dtype, {}, "", ""};
    if (out.sources.size() == 1 && out.kind != OutputKind::kSampleId) {
      const auto& type = schema.field(layout.fields[static_cast<size_t>(out.sources[0])])->type();
      info.source_type = type->ToString();
      // A transform that changes the type, or makes ids of the values, leaves no unit.
      if (KeepsUnit(layout, static_cast<size_t>(out.sources[0]))) {
        info.unit = TimeUnitName(*type);
      }
    } else if (out.kind == OutputKind::kStack) {
      std::vector<std::string> names;
      for (int source : out.sources) {
        names.push_back(schema.field(layout.fields[static_cast<size_t>(source)])->name());
      }
      info.unit = StackUnit(schema, layout, out, names, nullptr);
    }
    switch (out.kind) {
      case OutputKind::kScalar:
      case OutputKind::kSampleId:
        infos.push_back(std::move(info));
        break;
      case OutputKind::kStack:
      case OutputKind::kFixedList:
        info.inner_shape =
            out.inner_shape.empty() ? std::vector<int64_t>{out.width} : out.inner_shape;
        infos.push_back(std::move(info));
        break;
      case OutputKind::kList:
        info.inner_shape = {-1};
        infos.push_back(std::move(info));
        infos.push_back({out.name + "_lengths", DType::kInt64, {}, "", ""});
        break;
    }
  }
  return infos;
}

std::string TimeUnitName(const arrow::DataType& type) {
  const arrow::DataType* value = &type;
  if (IsListType(type.id()))
    value = static_cast<const arrow::BaseListType&>(type).value_type().get();
  switch (value->id()) {
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
      return "days";
    case arrow::Type::TIMESTAMP:
      return UnitName(static_cast<const arrow::TimestampType&>(*value).unit());
    case arrow::Type::TIME32:
    case arrow::Type::TIME64:
      return UnitName(static_cast<const arrow::TimeType&>(*value).unit());
    case arrow::Type::DURATION:
      return UnitName(static_cast<const arrow::DurationType&>(*value).unit());
    default:
      return "";
  }
}

}  // namespace shardfeed
