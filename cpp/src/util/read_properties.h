// The Arrow read properties every reader of a dataset's files starts from
// (internal), so that the catalog's column types are the decoder's.
#pragma once

#include <arrow/type_fwd.h>
#include <parquet/properties.h>

namespace shardfeed {

// Spark's INT96 timestamps are read as microseconds, their precision: as
// nanoseconds (Arrow's default) dates before 1677 or after 2262 (Spark's
// 0001-01-01 and 9999-12-31 placeholders, historical dates) wrapped silently.
inline parquet::ArrowReaderProperties ArrowReadDefaults() {
  parquet::ArrowReaderProperties props;
  props.set_coerce_int96_timestamp_unit(arrow::TimeUnit::MICRO);
  return props;
}

}  // namespace shardfeed
