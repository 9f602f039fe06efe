// Schema evolution: one dataset schema from files whose schemas differ (internal).
//
// Columns are matched by name.  Types that can hold each other's values are
// promoted to one common type, as pyarrow's promote_options="permissive" does
// where that is safe: integer widths to the widest (a signed/unsigned mix to
// the smallest signed type that holds both; uint64 with a signed type is an
// error, as no integer type holds both), integers with floats to float64,
// float widths to the widest, string/large_string to large_string (binary
// alike), list/large_list to large_list of the promoted element type, the
// finer of two timestamp, duration or time units (time zones must agree),
// date32/date64 to date32, decimals of other precision (or with numbers) to
// float64, and the null type (an all-null pandas column) to the other type.
// A dictionary type counts as its value type.  A column missing from some
// files, or nullable in some, is nullable.  Types that cannot be promoted are
// recorded as a conflict, and only a loader that uses the column fails.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace shardfeed {

// Field metadata key of a dataset column whose types conflict; the value is
// the message that using the column raises (SchemaMismatchError).
inline constexpr char kConflictKey[] = "shardfeed.conflict";

// `type` with every dictionary type replaced by its value type.
std::shared_ptr<arrow::DataType> StripDictionary(const std::shared_ptr<arrow::DataType>& type);

// The common type of `a` and `b` (dictionaries already stripped), or a
// TypeError when no type holds the values of both.
arrow::Result<std::shared_ptr<arrow::DataType>> PromoteTypes(
    const std::shared_ptr<arrow::DataType>& a, const std::shared_ptr<arrow::DataType>& b);

struct UnifiedColumn {
  std::shared_ptr<arrow::Field> field;  // the promoted type; conflict in its metadata
  std::vector<std::string> file_types;  // the distinct types in the files, in order of appearance
  int64_t missing_files = 0;            // files without this column
  std::string conflict;                 // non-empty: types that cannot be promoted
  std::string struct_origin;            // the top-level struct it was flattened from; "": its own
};

class SchemaUnifier {
 public:
  // Adds the next file (catalog order).  `hidden`, when given: per field of
  // `schema`, true for a field that is not a column (a Delta column dropped
  // from the table's schema).
  // `top`, when given, is the file's schema before its structs were flattened
  // (util/struct_fields.h): a column of its own and a struct's field that are
  // named alike ('s.a'), or a top-level name that is a struct in one file and
  // a column in another, are then conflicts rather than one column.
  // `origins`, when given with `top`: per field of `schema`, the struct of
  // `top` it was flattened from, or "" (FlatField::path empty): what tells a
  // struct's 's.a' from a column named 's.a' in one file.  Without it they
  // are told apart by name, which cannot when both are in the file.
  // `int96`, when given: per field, a naive timestamp stored as INT96, which Spark
  // writes as instants in UTC: beside a zoned timestamp it is one (UTC) rather than
  // wall-clock time, which has no common type with a zoned one.
  void Add(const std::string& rel_path, const arrow::Schema& schema,
           const std::vector<bool>* hidden = nullptr, const arrow::Schema* top = nullptr,
           const std::vector<std::string>* origins = nullptr,
           const std::vector<bool>* int96 = nullptr);

  // The dataset's columns: the first file's order, then new columns in order
  // of appearance.
  std::vector<UnifiedColumn> Columns() const;
  // Per added file: dataset column -> the file's top-level field, -1 when missing.
  std::vector<std::vector<int>> FieldMaps() const;
  // True when every file has exactly the first file's schema.
  bool uniform() const { return uniform_; }
  // Where `name` is a struct's (the struct itself, or one of its fields as a
  // column, 's.a'), what it is and in which file; else "".  A partition key
  // of that name could stand for neither.
  std::string StructNamed(const std::string& name) const;

 private:
  struct Column {
    UnifiedColumn info;
    std::string type_file;  // a file that has the column's first type
    int64_t present = 0;
    // The shape of its collapsed fixed-size lists (convert.h kShapeKey), from
    // the first file that has one, and that file.
    std::string shape, shape_file;
    // The top-level field of its first file it was flattened from ("": a
    // column of its own), when known.
    std::optional<std::string> origin;
    // Every file so far holds it as INT96 (a naive timestamp that is an instant).
    bool int96 = false;
  };
  // Per top-level name: a file where it is a struct (flattened), one where it
  // is a column of its own.
  struct TopKinds {
    std::string struct_file, column_file;
  };
  // For column c: the conflict message when another column of `same_lower`
  // (the columns whose lower-case names are c's) differs from it only in case
  // and no file has both; else "".
  std::string CaseTwin(size_t c, const std::vector<size_t>& same_lower) const;

  std::vector<Column> columns_;
  std::map<std::string, TopKinds> tops_;
  // The last top-level schema given to Add, and its fields' origins.
  std::shared_ptr<arrow::Schema> last_top_;
  std::vector<std::string> last_origins_;
  std::vector<std::vector<int>> maps_;
  std::vector<std::string> files_;  // rel_path of each added file
  std::shared_ptr<arrow::Schema> first_;
  bool uniform_ = true;
};

// Of a table's `declared` columns (a Delta table's, by its log's schema), those
// its files' unified `columns` lack (added since its last write; a column the
// files hold under another case, `ID` for `id`, counts as held), and, with
// `widen`, those the files hold narrower than declared, as the table's type
// widening makes them: a wider signed integer, float32 to float64, an integer
// of at most 32 bits to float64, a date to a naive timestamp.  Other
// differences are left to the files' types.
arrow::FieldVector ColumnsBeyond(const std::vector<UnifiedColumn>& columns,
                                 const arrow::FieldVector& declared, bool widen);

// Applies ColumnsBeyond's `beyond` to `columns` (of `num_files` files): a
// widened column takes the declared type; an added one comes last, nullable,
// missing from every file.  False when nothing changed.
bool ApplyColumnsBeyond(const arrow::FieldVector& beyond, int64_t num_files,
                        std::vector<UnifiedColumn>* columns);

}  // namespace shardfeed
