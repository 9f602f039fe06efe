// How the requested outputs map onto decoded columns (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "shardfeed/batch.h"
#include "shardfeed/output.h"
#include "transform/transform.h"

namespace shardfeed {

enum class OutputKind { kScalar, kStack, kFixedList, kList, kSampleId };

struct OutputPlan {
  std::string name;
  OutputKind kind = OutputKind::kScalar;
  DType dtype = DType::kFloat32;  // output element type
  std::vector<int> sources;       // indices into Layout::fields
  int64_t width = 1;              // stack: number of columns; fixed list: list size
  // Fixed lists: the shape of a row's `width` values when they are an array
  // of several dimensions (a fixed_shape_tensor, nested fixed-size lists;
  // convert.h kShapeKey); empty: [width].
  std::vector<int64_t> inner_shape;
  // Stacks: the matrix's dtype before the stack's own transforms, those
  // transforms (indices into Layout::transforms, in list order, FillNull
  // excluded) and the per-feature values of its FillNull (empty: none).
  DType matrix_dtype = DType::kFloat32;
  std::vector<size_t> transforms;
  std::vector<double> fill;
};

struct Layout {
  std::vector<int> fields;                            // top-level schema fields to decode
  std::vector<std::string> field_names;               // their names (for messages)
  std::vector<DType> field_dtypes;                    // their value types
  std::vector<bool> field_used_alone;                 // read by an output other than a stack
  std::vector<DType> field_raw_dtypes;                // their types before transforms
  std::vector<ColumnShape> field_shapes;              // scalar, fixed-size list, list
  std::vector<bool> field_from_strings;               // strings, hashed for a HashBucket
  std::vector<std::vector<size_t>> field_transforms;  // indices into `transforms`, in order
  std::vector<TransformSpec> transforms;
  std::vector<OutputPlan> outputs;
  // Per field: the value that replaces its nulls (checked to fit its final
  // dtype exactly), or nullopt: a null is an error.
  std::vector<std::optional<double>> field_fill_null;
  // Per field: its nulls are kept past the column's transforms, for the
  // FillNull of the stacks that hold it (it feeds only such stacks).
  std::vector<bool> field_nulls_to_stack;
};

arrow::Result<Layout> MakeLayout(const arrow::Schema& schema, const OutputOptions& options);

// The value type of a numeric/bool Arrow type, or an error naming the column.
arrow::Result<DType> ValueDType(const arrow::DataType& type, const std::string& column);

// How many of the field's transforms (from the start of its chain) are
// deterministic: the part the decoded tier may store.
size_t DeterministicPrefix(const Layout& layout, size_t field);

// Whether no member of stack `plan` has a random transform: its matrix (before
// the stack's own transforms) is then a pure function of the row group.
bool MembersDeterministic(const Layout& layout, const OutputPlan& plan);

// "days" for dates; "s", "ms", "us" or "ns" for timestamps, times and
// durations (also as list elements); empty for other types.
std::string TimeUnitName(const arrow::DataType& type);

}  // namespace shardfeed
