#include "exec/convert.h"

#include <arrow/array.h>
#include <arrow/compute/cast.h>
#include <arrow/compute/initialize.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>

#include "util/memory.h"
#include "util/string_array.h"

namespace shardfeed {

namespace {

// Arrow >= 21 registers its compute kernels on request; once per process.
arrow::Status InitCompute() {
  static const arrow::Status status = arrow::compute::Initialize();
  return status;
}

}  // namespace

std::shared_ptr<arrow::DataType> ReadType(const std::shared_ptr<arrow::DataType>& type) {
  switch (type->id()) {
    case arrow::Type::DICTIONARY:
      return ReadType(static_cast<const arrow::DictionaryType&>(*type).value_type());
    case arrow::Type::DATE64:
      return arrow::date32();
    case arrow::Type::DECIMAL32:
    case arrow::Type::DECIMAL64:
    case arrow::Type::DECIMAL128:
    case arrow::Type::DECIMAL256:
      return arrow::float64();
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::BaseListType&>(*type);
      auto values = ReadType(list.value_type());
      if (values == list.value_type()) return type;
      auto element = list.value_field()->WithType(values);
      if (type->id() == arrow::Type::LIST) return arrow::list(element);
      if (type->id() == arrow::Type::LARGE_LIST) return arrow::large_list(element);
      return arrow::fixed_size_list(
          element, static_cast<const arrow::FixedSizeListType&>(*type).list_size());
    }
    default:
      return type;
  }
}

arrow::Result<std::shared_ptr<arrow::Array>> ConformArray(
    const std::shared_ptr<arrow::Array>& array, const std::shared_ptr<arrow::DataType>& read_type) {
  // Equal up to the names of list elements ("item" / "element"): nothing to do.
  if (array->type()->Equals(*read_type, /*check_metadata=*/false)) return array;
  // Strings are only ever hashed, and the hasher maps a dictionary's values
  // once (pandas and polars categoricals): decoding them would only cost.
  if (IsStringDictionary(*array) && IsStringLike(read_type->id())) return array;
  if (arrow::is_list(array->type_id()) && array->type_id() == read_type->id()) {
    const auto& have = static_cast<const arrow::BaseListType&>(*array->type());
    const auto& want = static_cast<const arrow::BaseListType&>(*read_type);
    if (have.value_type()->Equals(*want.value_type())) return array;
  }
  ARROW_RETURN_NOT_OK(InitCompute());
  auto options = arrow::compute::CastOptions::Safe();
  // Widening is what the catalog allowed: integers beyond 2^53 as float64 may
  // round, decimals round to the nearest float64, and date64 values keep
  // their day.  Integer and time overflow stays an error.
  options.allow_float_truncate = true;
  options.allow_decimal_truncate = true;
  options.allow_time_truncate = true;
  arrow::compute::ExecContext context(EnginePool());
  return arrow::compute::Cast(*array, read_type, options, &context);
}

arrow::Result<std::shared_ptr<arrow::Array>> ConstantArray(
    const std::shared_ptr<arrow::Scalar>& value, const std::shared_ptr<arrow::DataType>& type,
    int64_t length) {
  if (!value || !value->is_valid) return arrow::MakeArrayOfNull(type, length, EnginePool());
  std::shared_ptr<arrow::Scalar> typed = value;
  if (!value->type->Equals(*type)) {
    ARROW_RETURN_NOT_OK(InitCompute());
    ARROW_ASSIGN_OR_RAISE(typed, value->CastTo(type));
  }
  return arrow::MakeArrayFromScalar(*typed, length, EnginePool());
}

}  // namespace shardfeed
