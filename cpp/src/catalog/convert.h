// From each file's columns to the dataset's types (internal).
//
// Files of one dataset may store a column with other types (catalog/unify.h),
// a dictionary encoding, or not at all; partition columns live only in paths.
// Before flattening, every column becomes an array of one "read type" per
// dataset column, whose values buffer is what the batch hands out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace shardfeed {

// A list, a large list or a fixed-size list (not a map).
inline bool IsListType(arrow::Type::type id) {
  return id == arrow::Type::LIST || id == arrow::Type::LARGE_LIST ||
         id == arrow::Type::FIXED_SIZE_LIST;
}

// An extension type's storage type (the canonical arrow.uuid,
// arrow.fixed_shape_tensor, arrow.json, arrow.bool8, pandas' period, ...),
// inside lists too; every other type as it is.  A dataset column of such a
// type is its storage: a fixed_shape_tensor its fixed-size list of values.
// Fixed-size lists inside a list, a large list or a fixed-size list (polars'
// multi-dimensional arrays, Hugging Face's nested Sequence) are
// one list of their values, as CollapseFixedLists reads them: fixed_size_list<
// fixed_size_list<float, 3>, 2> is fixed_size_list<float, 6>, list<
// fixed_size_list<float, 3>> a list<float> of 3 values per element.
std::shared_ptr<arrow::DataType> StorageType(const std::shared_ptr<arrow::DataType>& type);

// Field metadata key of a column whose values StorageType laid out flat from
// arrays of several dimensions: the sizes of its levels, outermost first
// ("[2, 3]" for fixed_size_list<fixed_size_list<float, 3>, 2> and for a
// fixed_shape_tensor of shape [2, 3], "[*, 3]" for list<fixed_size_list<float,
// 3>>).  On a file's column it tells apart files whose arrays have other shapes
// but the same number of values; on a dataset column it gives the shape a
// batch hands out ([batch, 2, 3]).
inline constexpr char kShapeKey[] = "shardfeed.shape";

// That text for `type`, or "" when it has fewer than two levels of lists
// (or a variable-length one below the first, which stays nested).
std::string CollapsedShape(const arrow::DataType& type);

// The dimensions of `field`'s kShapeKey when every one is fixed ([2, 3]); else
// empty (no key, or a variable-length first level).
std::vector<int64_t> FixedShape(const arrow::Field& field);

// `array` with its fixed-size lists inside lists collapsed into their values,
// in order (StorageType): row r's values are its elements' values one after
// the other, and a null element's values are null.  Other arrays as they are.
arrow::Result<std::shared_ptr<arrow::Array>> CollapseFixedLists(
    const std::shared_ptr<arrow::Array>& array);

// The type a dataset column is read as: date64 -> date32 (days), decimals ->
// float64, dictionaries -> their values, inside lists too; every other type
// as it is (timestamps, times and durations are their integers already).
std::shared_ptr<arrow::DataType> ReadType(const std::shared_ptr<arrow::DataType>& dataset_type);

// `array` (one file's column, in the file's type) as `read_type`: dictionaries
// decoded (but for strings, which the hasher takes as they are), promoted
// types widened.  Overflow is an error, never a wrap.
arrow::Result<std::shared_ptr<arrow::Array>> ConformArray(
    const std::shared_ptr<arrow::Array>& array, const std::shared_ptr<arrow::DataType>& read_type);

// `length` copies of `value` as `type`: a partition column (cheap: one value
// repeated), or all nulls for a column a file lacks (`value` null).
arrow::Result<std::shared_ptr<arrow::Array>> ConstantArray(
    const std::shared_ptr<arrow::Scalar>& value, const std::shared_ptr<arrow::DataType>& type,
    int64_t length);

}  // namespace shardfeed
