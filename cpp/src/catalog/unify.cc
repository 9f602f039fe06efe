#include "catalog/unify.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <arrow/util/key_value_metadata.h>

#include "catalog/convert.h"
#include "shardfeed/status.h"

namespace shardfeed {

namespace {

using arrow::Type;
using TypePtr = std::shared_ptr<arrow::DataType>;

int IntBits(const arrow::DataType& t) {
  return static_cast<const arrow::FixedWidthType&>(t).bit_width();
}

TypePtr IntType(int bits, bool is_signed) {
  switch (bits) {
    case 8:
      return is_signed ? arrow::int8() : arrow::uint8();
    case 16:
      return is_signed ? arrow::int16() : arrow::uint16();
    case 32:
      return is_signed ? arrow::int32() : arrow::uint32();
    default:
      return is_signed ? arrow::int64() : arrow::uint64();
  }
}

bool IsStringLike(Type::type id) {
  return id == Type::STRING || id == Type::LARGE_STRING || id == Type::STRING_VIEW;
}

bool IsBinaryLike(Type::type id) {
  return id == Type::BINARY || id == Type::LARGE_BINARY || id == Type::BINARY_VIEW;
}

bool IsVarList(Type::type id) { return id == Type::LIST || id == Type::LARGE_LIST; }

bool IsNumber(Type::type id) {
  return arrow::is_integer(id) || arrow::is_floating(id) || arrow::is_decimal(id);
}

arrow::TimeUnit::type Finer(arrow::TimeUnit::type a, arrow::TimeUnit::type b) {
  return std::max(a, b);  // SECOND < MILLI < MICRO < NANO
}

arrow::Status Incompatible(const TypePtr& a, const TypePtr& b) {
  return arrow::Status::TypeError(a->ToString(), " and ", b->ToString(), " have no common type");
}

arrow::Result<TypePtr> PromoteIntegers(const TypePtr& a, const TypePtr& b) {
  const bool sa = arrow::is_signed_integer(a->id()), sb = arrow::is_signed_integer(b->id());
  const int wa = IntBits(*a), wb = IntBits(*b);
  if (sa == sb) return IntType(std::max(wa, wb), sa);
  const int signed_bits = sa ? wa : wb, unsigned_bits = sa ? wb : wa;
  if (signed_bits > unsigned_bits) return IntType(signed_bits, true);
  // A signed type twice as wide as the unsigned one holds both; none holds uint64.
  if (unsigned_bits < 64) return IntType(unsigned_bits * 2, true);
  return Incompatible(a, b);
}

arrow::Result<TypePtr> PromoteLists(const TypePtr& a, const TypePtr& b) {
  const auto& la = static_cast<const arrow::BaseListType&>(*a);
  const auto& lb = static_cast<const arrow::BaseListType&>(*b);
  ARROW_ASSIGN_OR_RAISE(TypePtr values, PromoteTypes(la.value_type(), lb.value_type()));
  // The element field keeps the first type's name ("item", "element") and is
  // nullable when either is.
  auto element = la.value_field()->WithType(values)->WithNullable(la.value_field()->nullable() ||
                                                                  lb.value_field()->nullable());
  if (a->id() == Type::FIXED_SIZE_LIST) {
    const auto size = static_cast<const arrow::FixedSizeListType&>(*a).list_size();
    if (b->id() != Type::FIXED_SIZE_LIST ||
        static_cast<const arrow::FixedSizeListType&>(*b).list_size() != size) {
      return Incompatible(a, b);
    }
    return arrow::fixed_size_list(element, size);
  }
  if (!IsVarList(b->id())) return Incompatible(a, b);
  if (a->id() == Type::LARGE_LIST || b->id() == Type::LARGE_LIST) {
    return arrow::large_list(element);
  }
  return arrow::list(element);
}

arrow::Result<TypePtr> PromoteTemporal(const TypePtr& a, const TypePtr& b) {
  const auto ia = a->id(), ib = b->id();
  if (ia == Type::TIMESTAMP && ib == Type::TIMESTAMP) {
    const auto& ta = static_cast<const arrow::TimestampType&>(*a);
    const auto& tb = static_cast<const arrow::TimestampType&>(*b);
    if (ta.timezone() == tb.timezone()) {
      return arrow::timestamp(Finer(ta.unit(), tb.unit()), ta.timezone());
    }
    // Zoned timestamps are instants stored in UTC whatever the zone names (files written
    // from sessions in different zones): UTC is their common type, with the same values.
    // A zoned and a naive (wall-clock) one have none.
    if (ta.timezone().empty() || tb.timezone().empty()) return Incompatible(a, b);
    return arrow::timestamp(Finer(ta.unit(), tb.unit()), "UTC");
  }
  if ((ia == Type::DATE32 || ia == Type::DATE64) && (ib == Type::DATE32 || ib == Type::DATE64)) {
    return arrow::date32();
  }
  // A date with a naive (wall-clock) timestamp: the timestamp, a date its
  // midnight (Delta's type widening of a date to timestamp_ntz).  A zoned one
  // names instants, which a date does not: no common type.
  for (const auto& [date, time] : {std::pair(a, b), std::pair(b, a)}) {
    if ((date->id() == Type::DATE32 || date->id() == Type::DATE64) &&
        time->id() == Type::TIMESTAMP &&
        static_cast<const arrow::TimestampType&>(*time).timezone().empty()) {
      return time;
    }
  }
  if (ia == Type::DURATION && ib == Type::DURATION) {
    return arrow::duration(Finer(static_cast<const arrow::DurationType&>(*a).unit(),
                                 static_cast<const arrow::DurationType&>(*b).unit()));
  }
  if ((ia == Type::TIME32 || ia == Type::TIME64) && (ib == Type::TIME32 || ib == Type::TIME64)) {
    const auto unit = Finer(static_cast<const arrow::TimeType&>(*a).unit(),
                            static_cast<const arrow::TimeType&>(*b).unit());
    return unit <= arrow::TimeUnit::MILLI ? arrow::time32(unit) : arrow::time64(unit);
  }
  return Incompatible(a, b);
}

}  // namespace

TypePtr StripDictionary(const TypePtr& type) {
  switch (type->id()) {
    case Type::DICTIONARY:
      return StripDictionary(static_cast<const arrow::DictionaryType&>(*type).value_type());
    case Type::LIST:
    case Type::LARGE_LIST:
    case Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::BaseListType&>(*type);
      auto values = StripDictionary(list.value_type());
      if (values == list.value_type()) return type;
      auto element = list.value_field()->WithType(values);
      if (type->id() == Type::LIST) return arrow::list(element);
      if (type->id() == Type::LARGE_LIST) return arrow::large_list(element);
      return arrow::fixed_size_list(
          element, static_cast<const arrow::FixedSizeListType&>(*type).list_size());
    }
    default:
      return type;
  }
}

namespace {

bool IsZoned(const arrow::DataType& type) {
  return type.id() == Type::TIMESTAMP &&
         !static_cast<const arrow::TimestampType&>(type).timezone().empty();
}

// A naive timestamp as the same instants in UTC; any other type as it is.
TypePtr AsUtc(const arrow::DataType& type) {
  if (type.id() != Type::TIMESTAMP || IsZoned(type)) return type.GetSharedPtr();
  return arrow::timestamp(static_cast<const arrow::TimestampType&>(type).unit(), "UTC");
}

}  // namespace

arrow::Result<TypePtr> PromoteTypes(const TypePtr& a, const TypePtr& b) {
  if (a->Equals(*b)) return a;
  const auto ia = a->id(), ib = b->id();
  if (ia == Type::NA) return b;
  if (ib == Type::NA) return a;
  if (arrow::is_integer(ia) && arrow::is_integer(ib)) return PromoteIntegers(a, b);
  if (arrow::is_floating(ia) && arrow::is_floating(ib)) {
    return IntBits(*a) >= IntBits(*b) ? a : b;
  }
  // Decimals become float64 anyway; integers with floats need float64's 53 bits.
  if (IsNumber(ia) && IsNumber(ib)) return arrow::float64();
  if (IsStringLike(ia) && IsStringLike(ib)) return arrow::large_utf8();
  if (IsBinaryLike(ia) && IsBinaryLike(ib)) return arrow::large_binary();
  // Text without the UTF8 annotation (old Hive and Impala files) with text that
  // has it: the same bytes (what Spark's binaryAsString reads as one column).
  if ((IsStringLike(ia) || IsBinaryLike(ia)) && (IsStringLike(ib) || IsBinaryLike(ib))) {
    return arrow::large_binary();
  }
  if (arrow::is_list(ia) && arrow::is_list(ib)) return PromoteLists(a, b);
  const bool ta = arrow::is_temporal(ia) || ia == Type::DURATION;
  const bool tb = arrow::is_temporal(ib) || ib == Type::DURATION;
  if (ta && tb) return PromoteTemporal(a, b);
  return Incompatible(a, b);
}

namespace {

// A file column's collapsed shape (convert.h), or "".
std::string ShapeOf(const arrow::Field& field) {
  const auto& metadata = field.metadata();
  return metadata && metadata->Contains(kShapeKey) ? metadata->Get(kShapeKey).ValueOr("") : "";
}

// Per field of the flattened `schema`: the top-level field of `top` it was
// flattened from ("" for a top-level column, which keeps its name), and the
// top-level names that are structs, flattened into their fields.
std::vector<std::string> Origins(const arrow::Schema& schema, const arrow::Schema& top,
                                 std::set<std::string>* flattened) {
  std::set<std::string> kept;
  for (const auto& field : schema.fields()) kept.insert(field->name());
  for (const auto& field : top.fields()) {
    if (!kept.count(field->name())) flattened->insert(field->name());
  }
  std::vector<std::string> out;
  for (const auto& field : schema.fields()) {
    const std::string& name = field->name();
    std::string origin;
    // The longest struct name that, with a '.', begins it.
    for (const auto& t : *flattened) {
      if (name.size() > t.size() && name.compare(0, t.size(), t) == 0 && name[t.size()] == '.' &&
          t.size() > origin.size()) {
        origin = t;
      }
    }
    // A top-level column of that very name wins (a literal 's.a').
    if (top.GetFieldIndex(name) >= 0 && !flattened->count(name)) origin.clear();
    out.push_back(std::move(origin));
  }
  return out;
}

std::string Describe(const std::string& name, const std::string& origin) {
  if (origin.empty()) return "a column of its own";
  return "the field '" + name.substr(origin.size() + 1) + "' of the struct '" + origin + "'";
}

}  // namespace

void SchemaUnifier::Add(const std::string& rel_path, const arrow::Schema& schema,
                        const std::vector<bool>* hidden, const arrow::Schema* top,
                        const std::vector<std::string>* origins_given,
                        const std::vector<bool>* int96) {
  // Files of one schema (the common case) are looked at once: the same top
  // level gives the same origins, and its kinds are already recorded.
  if (top && (!last_top_ || !top->Equals(*last_top_, /*check_metadata=*/false))) {
    std::set<std::string> flattened;
    last_origins_ = Origins(schema, *top, &flattened);
    for (const auto& field : top->fields()) {
      // An all-null column (pandas' None, typed null) holds no values to clash.
      if (field->type()->id() == arrow::Type::NA) continue;
      auto& kinds = tops_[field->name()];
      std::string& file = flattened.count(field->name()) ? kinds.struct_file : kinds.column_file;
      if (file.empty()) file = rel_path;
    }
    last_top_ = std::make_shared<arrow::Schema>(top->fields());
    // (The same top level flattens the same way: the given origins are those
    // of the next file of that schema too.)
    if (origins_given && static_cast<int>(origins_given->size()) == schema.num_fields()) {
      last_origins_ = *origins_given;
    }
  }
  const std::vector<std::string>& origins = last_origins_;
  if (!first_) {
    first_ = std::make_shared<arrow::Schema>(schema.fields());
  } else if (!schema.Equals(*first_, /*check_metadata=*/false)) {
    uniform_ = false;
  }
  std::map<std::string, int> index;
  for (size_t c = 0; c < columns_.size(); ++c) {
    index.emplace(columns_[c].info.field->name(), static_cast<int>(c));
  }
  std::vector<int> map(columns_.size(), -1);
  for (int f = 0; f < schema.num_fields(); ++f) {
    if (hidden && (*hidden)[static_cast<size_t>(f)]) continue;
    const auto& field = schema.field(f);
    const auto type = StripDictionary(field->type());
    auto it = index.find(field->name());
    if (it == index.end()) {
      Column column;
      column.info.field = arrow::field(field->name(), type, field->nullable() || !maps_.empty());
      column.info.missing_files = static_cast<int64_t>(maps_.size());
      column.info.file_types.push_back(type->ToString());
      column.type_file = rel_path;
      column.present = 1;
      column.shape = ShapeOf(*field);
      if (!column.shape.empty()) column.shape_file = rel_path;
      if (top) column.origin = origins[static_cast<size_t>(f)];
      column.int96 = int96 && (*int96)[static_cast<size_t>(f)];
      index.emplace(field->name(), static_cast<int>(columns_.size()));
      columns_.push_back(std::move(column));
      map.push_back(f);
      continue;
    }
    if (map[static_cast<size_t>(it->second)] >= 0) {
      // Two columns of one file share a name: which one the user meant is unknowable, so
      // reading it is an error (leaving it out is not).
      auto& info = columns_[static_cast<size_t>(it->second)].info;
      if (info.conflict.empty()) {
        info.conflict =
            "file '" + rel_path + "' has more than one column named '" + field->name() + "'";
        if (top) {  // (a struct's field and a column that is named as it is)
          const std::string& first =
              origins[static_cast<size_t>(map[static_cast<size_t>(it->second)])];
          const std::string& second = origins[static_cast<size_t>(f)];
          if (first != second) {
            info.conflict +=
                ": " + Describe(field->name(), first) + " and " + Describe(field->name(), second);
          }
        }
        info.conflict += " (leave it out with columns=[...] or rename one of them)";
      }
      continue;
    }
    map[static_cast<size_t>(it->second)] = f;
    auto& column = columns_[static_cast<size_t>(it->second)];
    ++column.present;
    auto& info = column.info;
    if (top && info.conflict.empty()) {
      const std::string& origin = origins[static_cast<size_t>(f)];
      if (!column.origin) {
        column.origin = origin;
      } else if (*column.origin != origin) {
        info.conflict = "column '" + field->name() + "' is " +
                        Describe(field->name(), *column.origin) + " in file '" + column.type_file +
                        "' and " + Describe(field->name(), origin) + " in file '" + rel_path +
                        "': they are not one column (leave it out with columns=[...] or rename "
                        "one of them)";
      }
    }
    const std::string type_text = type->ToString();
    if (std::find(info.file_types.begin(), info.file_types.end(), type_text) ==
        info.file_types.end()) {
      info.file_types.push_back(type_text);
    }
    bool nullable = info.field->nullable() || field->nullable();
    if (!info.conflict.empty()) continue;
    const std::string shape = ShapeOf(*field);
    if (!shape.empty() && column.shape.empty()) {
      column.shape = shape;
      column.shape_file = rel_path;
    } else if (!shape.empty() && shape != column.shape) {
      // The same number of values in arrays of other shapes: one row-major
      // order would read one of them wrong.
      info.conflict = "column '" + field->name() + "' holds arrays of shape " + column.shape +
                      " in file '" + column.shape_file + "' and " + shape + " in file '" +
                      rel_path +
                      "' (leave the column out with columns=[...] or rewrite one of the files)";
      continue;
    }
    // Spark's INT96 timestamps are instants in UTC: beside a zoned timestamp, UTC's
    // (a table written before and after outputTimestampType changed); beside a
    // naive one, still naive.
    const bool their_int96 = int96 && (*int96)[static_cast<size_t>(f)];
    TypePtr ours = info.field->type(), theirs = type;
    if (their_int96 && IsZoned(*ours)) theirs = AsUtc(*theirs);
    if (column.int96 && IsZoned(*theirs)) ours = AsUtc(*ours);
    column.int96 = column.int96 && their_int96;
    auto promoted = PromoteTypes(ours, theirs);
    if (!promoted.ok()) {
      info.conflict = "file '" + rel_path + "' has a schema that differs from file '" +
                      column.type_file + "': column '" + field->name() + "' is " + type_text +
                      ", expected " + info.file_types.front() +
                      ", and the two have no common type (leave the column out with "
                      "columns=[...] or rewrite one of the files)";
      continue;
    }
    info.field = info.field->WithType(*promoted)->WithNullable(nullable);
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (map[c] < 0 && !columns_[c].info.field->nullable()) {
      columns_[c].info.field = columns_[c].info.field->WithNullable(true);
    }
  }
  maps_.push_back(std::move(map));
  files_.push_back(rel_path);
}

namespace {

std::string Lower(const std::string& name) {
  std::string out = name;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string SchemaUnifier::CaseTwin(size_t c, const std::vector<size_t>& same_lower) const {
  const std::string& name = columns_[c].info.field->name();
  for (const size_t d : same_lower) {
    const std::string& other = columns_[d].info.field->name();
    if (d == c || other == name) continue;
    // Twins when no file has both: one column renamed, as a case-insensitive
    // writer (Spark, Hive) sees it.  Two columns of one file are two columns.
    const bool together = std::any_of(maps_.begin(), maps_.end(), [&](const auto& map) {
      return c < map.size() && d < map.size() && map[c] >= 0 && map[d] >= 0;
    });
    if (together) continue;
    auto first_with = [&](size_t k) {
      for (size_t f = 0; f < maps_.size(); ++f) {
        if (k < maps_[f].size() && maps_[f][k] >= 0) return files_[f];
      }
      return std::string();
    };
    return "column '" + name + "' is in " + std::to_string(columns_[c].present) +
           " file(s) (such as '" + first_with(c) + "') and '" + other + "' in " +
           std::to_string(columns_[d].present) + " other(s) (such as '" + first_with(d) +
           "'): names that differ only in case, which Spark and Hive read as one column; "
           "shardfeed matches names exactly, so each would read as nulls in the other's files. "
           "Rewrite one set of files with the other spelling, or leave both out with "
           "columns=[...]";
  }
  return "";
}

std::string SchemaUnifier::StructNamed(const std::string& name) const {
  if (const auto kinds = tops_.find(name);
      kinds != tops_.end() && !kinds->second.struct_file.empty()) {
    return "a struct in file '" + kinds->second.struct_file + "'";
  }
  for (const auto& column : columns_) {
    if (!column.origin || column.origin->empty()) continue;
    const std::string& field = column.info.field->name();
    if (field == name)
      return Describe(name, *column.origin) + " in file '" + column.type_file + "'";
    // A struct inside the struct ('s.inner' of 's.inner.x'), at or below its top.
    if (name.size() > column.origin->size() && field.size() > name.size() + 1 &&
        field.compare(0, name.size(), name) == 0 && field[name.size()] == '.' &&
        name.compare(0, column.origin->size(), *column.origin) == 0 &&
        name[column.origin->size()] == '.') {
      return "the struct '" + name + "' inside the struct '" + *column.origin + "' in file '" +
             column.type_file + "'";
    }
  }
  return "";
}

std::vector<UnifiedColumn> SchemaUnifier::Columns() const {
  std::vector<UnifiedColumn> out;
  std::map<std::string, std::vector<size_t>> by_lower;  // lower-case name -> columns
  for (size_t c = 0; c < columns_.size(); ++c) {
    by_lower[Lower(columns_[c].info.field->name())].push_back(c);
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    const auto& column = columns_[c];
    UnifiedColumn info = column.info;
    info.missing_files = static_cast<int64_t>(maps_.size()) - column.present;
    info.struct_origin = column.origin.value_or("");
    // A name that is a struct in one file and a column in another: neither
    // its fields nor the column can stand for the rows of the other files.
    const std::string& name = info.field->name();
    const std::string top_name = column.origin && !column.origin->empty() ? *column.origin : name;
    if (const auto kinds = tops_.find(top_name); info.conflict.empty() && kinds != tops_.end() &&
                                                 !kinds->second.struct_file.empty() &&
                                                 !kinds->second.column_file.empty()) {
      info.conflict = "'" + top_name + "' is a struct in file '" + kinds->second.struct_file +
                      "' (its fields are columns named '" + top_name +
                      ".<field>') and a column of its own in file '" + kinds->second.column_file +
                      "': neither can stand for the other's rows (leave them out with "
                      "columns=[...] or rewrite one of the files)";
    }
    const auto& same_lower = by_lower[Lower(info.field->name())];
    if (info.conflict.empty() && info.missing_files > 0 && same_lower.size() > 1) {
      info.conflict = CaseTwin(c, same_lower);
    }
    if (!info.conflict.empty()) {
      info.field =
          info.field->WithMetadata(arrow::key_value_metadata({kConflictKey}, {info.conflict}));
    } else if (!column.shape.empty()) {
      info.field = info.field->WithMetadata(arrow::key_value_metadata({kShapeKey}, {column.shape}));
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::vector<int>> SchemaUnifier::FieldMaps() const {
  std::vector<std::vector<int>> out = maps_;
  for (auto& map : out) map.resize(columns_.size(), -1);
  return out;
}

namespace {

// Whether a table's type widening makes `to` of a column written as `from`.
bool Widened(const arrow::DataType& from, const arrow::DataType& to) {
  const auto f = from.id(), t = to.id();
  if (arrow::is_signed_integer(f) && arrow::is_signed_integer(t))
    return to.byte_width() > from.byte_width();
  if (f == arrow::Type::FLOAT) return t == arrow::Type::DOUBLE;
  if (arrow::is_signed_integer(f) && t != arrow::Type::DECIMAL128) {
    return t == arrow::Type::DOUBLE && from.byte_width() <= 4;
  }
  if (f == arrow::Type::DATE32 || f == arrow::Type::DATE64) {
    return t == arrow::Type::TIMESTAMP &&
           static_cast<const arrow::TimestampType&>(to).timezone().empty();
  }
  // Integers and decimals to a decimal that holds every value (Delta's rule: no fewer
  // digits before the point, no fewer after it); delivered as float64 like any decimal.
  if (t != arrow::Type::DECIMAL128) return false;
  const auto& wide = static_cast<const arrow::DecimalType&>(to);
  if (arrow::is_signed_integer(f)) {
    const int digits = from.byte_width() == 1   ? 3
                       : from.byte_width() == 2 ? 5
                       : from.byte_width() == 4 ? 10
                                                : 19;
    return wide.precision() - wide.scale() >= digits;
  }
  if (!arrow::is_decimal(f)) return false;
  const auto& narrow = static_cast<const arrow::DecimalType&>(from);
  return wide.scale() >= narrow.scale() &&
         wide.precision() - wide.scale() >= narrow.precision() - narrow.scale();
}

}  // namespace

arrow::FieldVector ColumnsBeyond(const std::vector<UnifiedColumn>& columns,
                                 const arrow::FieldVector& declared, bool widen) {
  arrow::FieldVector out;
  for (const auto& field : declared) {
    const auto exact = std::find_if(columns.begin(), columns.end(), [&](const UnifiedColumn& c) {
      return c.field->name() == field->name();
    });
    if (exact == columns.end()) {
      const bool other_case = std::any_of(
          columns.begin(), columns.end(),
          [&](const UnifiedColumn& c) { return Lower(c.field->name()) == Lower(field->name()); });
      if (!other_case) out.push_back(field->WithNullable(true));
    } else if (widen && exact->conflict.empty() &&
               Widened(*StripDictionary(exact->field->type()), *field->type())) {
      out.push_back(field);
    }
  }
  return out;
}

bool ApplyColumnsBeyond(const arrow::FieldVector& beyond, int64_t num_files,
                        std::vector<UnifiedColumn>* columns) {
  for (const auto& field : beyond) {
    const auto it = std::find_if(columns->begin(), columns->end(), [&](const UnifiedColumn& c) {
      return c.field->name() == field->name();
    });
    if (it != columns->end()) {
      it->field = it->field->WithType(field->type());
    } else {
      UnifiedColumn added;
      added.field = field->WithNullable(true);
      added.missing_files = num_files;
      columns->push_back(std::move(added));
    }
  }
  return !beyond.empty();
}

}  // namespace shardfeed
