// The Vocabulary transform on one decoded column (internal).
#pragma once

#include <arrow/status.h>

#include "shardfeed/transform.h"
#include "transform/column.h"

namespace shardfeed {

// Rewrites a string column (from_strings: values are StringHash64 hashes and
// `array` the strings) as int64 indices: t.vocabulary->Find(value), or t.n
// (the oov index) for values not in the list and for nulls, which it clears.
// A dictionary column is looked up once per dictionary value, then mapped.
arrow::Status ApplyVocabulary(const TransformSpec& t, DecodedColumn* column);

}  // namespace shardfeed
