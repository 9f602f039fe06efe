// One column of one decoded row group, as flat typed values: what transforms
// rewrite and what batches gather from (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "shardfeed/batch.h"

namespace shardfeed {

struct DecodedColumn {
  DType dtype = DType::kFloat32;            // element type (bools one byte each)
  const uint8_t* values = nullptr;          // element 0 (lists: child value 0)
  int64_t count = 0;                        // elements
  int64_t list_size = 0;                    // fixed-size lists: elements per row
  std::vector<int64_t> list_starts;         // variable-length lists: first element of each row
  std::vector<int64_t> list_lengths;        // variable-length lists: elements of each row
  std::vector<uint8_t> nulls;               // per element, 1 = null; empty when there are none
  std::shared_ptr<arrow::Array> null_rows;  // variable-length lists with null entries
  bool from_strings = false;                // values are 64-bit hashes of strings
  std::shared_ptr<arrow::Buffer> owned;     // our own copy of the values, when one was made
  std::shared_ptr<arrow::Array> array;      // keeps decoded Arrow memory alive

  bool has_nulls() const { return !nulls.empty(); }
};

// Gives the column its own writable copy of the values (once); returns it.
arrow::Result<uint8_t*> MutableValues(DecodedColumn* column);

// Rewrites the values as `to` (static_cast per element, an integer to another wrapping as
// two's complement; to bool: v != 0; a float to an integer as CastValues does).
arrow::Status ConvertValues(DecodedColumn* column, DType to);

// The Cast transform: as ConvertValues, but a value outside an integer type's range
// saturates at it, from an integer as from a float (which also truncates, NaN -> 0).
arrow::Status CastValues(DecodedColumn* column, DType to);

// Before a float transform (Standardize, Log1p, GaussianNoise): float32 and
// float64 columns stay; any other becomes float64, so that the arithmetic sees
// every digit of an integer (an epoch timestamp or a large id in float32 keeps
// 24 bits: 1.7e12 ms and 1.7e12 + 1000 ms were one value).  Returns the type
// to deliver afterwards (float64 for float64, else float32), for ConvertValues.
arrow::Result<DType> BeginFloatMath(DecodedColumn* column);

// Writes `value` into every null element and forgets the nulls.
arrow::Status FillNullValues(DecodedColumn* column, double value);

}  // namespace shardfeed
