// What a batch holds: which columns, stacks and transforms the caller asked
// for, and the outputs they describe.  Checked against a schema by
// DescribeOutputs without reading data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "shardfeed/batch.h"
#include "shardfeed/transform.h"

namespace shardfeed {

struct StackSpec {
  std::string name;                  // output name
  std::vector<std::string> columns;  // numeric scalar columns, in output order
};

struct OutputOptions {
  std::vector<std::string> columns;  // empty + all_columns: every column
  bool all_columns = true;
  std::vector<StackSpec> stacks;
  bool with_sample_id = false;      // adds "sample_id": int64 natural-order index
  std::optional<double> fill_null;  // nullopt: a null is an error
  // Per column (dataset column names); overrides fill_null for those columns.
  std::map<std::string, double> fill_null_columns;
  std::vector<TransformSpec> transforms;  // applied in order, before stacking
};

struct OutputInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> inner_shape;  // shape after the batch dimension (-1: varies)
  std::string source_type;           // the dataset column's Arrow type (one-column outputs)
  std::string unit;                  // times: "days", "s", "ms", "us", "ns"; else empty
};

// Checks columns, types and stacks against the schema without reading data.
arrow::Result<std::vector<OutputInfo>> DescribeOutputs(const arrow::Schema& schema,
                                                       const OutputOptions& options);

}  // namespace shardfeed
