// Delta Lake column mapping by name (internal).
//
// With `delta.columnMapping.mode = name` (what RENAME COLUMN and DROP COLUMN
// need, and what Databricks and delta-rs write for such tables) a Parquet
// file's columns are named by their *physical* names ("col-5f42...") and the
// table's schema (the log's `schemaString`) gives each field its display
// name and its physical one (`delta.columnMapping.physicalName`).  A column
// renamed later keeps its physical name; a dropped one stays in the files and
// leaves the schema.  So a file's fields are read under their display names,
// and a top-level column the schema no longer holds is left out.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace shardfeed {

// The separator of a field's path in ColumnMapping::display.
inline constexpr char kPathSeparator = '\x1f';

struct ColumnMapping {
  // Physical path -> display name, for the fields of every struct at any
  // depth: the physical names from the top-level column down, joined by
  // kPathSeparator (an array adds no step, a map "key" or "value").  By path, not by name: a
  // table upgraded to the mapping keeps its names as physical ones, so a
  // column and a struct's field may share one and be renamed apart.
  std::map<std::string, std::string> display;
  // The physical names of the table's top-level columns.
  std::set<std::string> top_level;
};

// The mapping a Delta `schemaString` (Spark's JSON schema) defines.  An
// InvalidData error for text that is not such a schema, a field without a
// physical name, or two fields of one struct with one physical name.
arrow::Result<ColumnMapping> ParseColumnMapping(std::string_view schema_string);

// The display name of a file's flattened field (struct fields joined by '.',
// util/struct_fields.h): each component mapped where the mapping names it (a
// list's "element" is kept).  nullopt when its top-level column is not in the
// table's schema (a dropped column).
std::optional<std::string> DisplayName(const ColumnMapping& mapping, const std::string& flat);

// The table's top-level columns of primitive types (boolean, byte, short,
// integer, long, float, double, string, binary, date, timestamp,
// timestamp_ntz, decimal(p,s)) as Arrow fields under their display names, all
// nullable; columns of other types (structs, arrays, maps, variants) and the
// names in `skip` (partition columns) are left out.  An InvalidData error for
// text that is not such a schema.
arrow::Result<arrow::FieldVector> PrimitiveColumns(std::string_view schema_string,
                                                   const std::vector<std::string>& skip);

}  // namespace shardfeed
