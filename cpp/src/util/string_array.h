// The bytes of one element of any Arrow string or binary array (internal).
#pragma once

#include <cstdint>
#include <string_view>

#include <arrow/array.h>
#include <arrow/type.h>
#include <arrow/util/utf8.h>

namespace shardfeed {

// string, large_string, string_view, their binary twins and fixed_size_binary
// (UUIDs, hashes): the types whose elements StringAt reads.
inline bool IsStringLike(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::BINARY || id == arrow::Type::LARGE_BINARY ||
         id == arrow::Type::STRING_VIEW || id == arrow::Type::BINARY_VIEW ||
         id == arrow::Type::FIXED_SIZE_BINARY;
}

// Whether `text` is valid UTF-8 (Arrow's validator, its tables made once).
inline bool ValidUtf8(std::string_view text) {
  static const bool ready = (arrow::util::InitializeUTF8(), true);
  (void)ready;
  return arrow::util::ValidateUTF8(text);
}

// Element i of a string-like array (IsStringLike(array.type_id())); no scalar
// per row.
inline std::string_view StringAt(const arrow::Array& array, int64_t i) {
  switch (array.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return static_cast<const arrow::BinaryArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return static_cast<const arrow::LargeBinaryArray&>(array).GetView(i);
    case arrow::Type::FIXED_SIZE_BINARY:
      return static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(i);
    default:  // string and binary views
      return static_cast<const arrow::BinaryViewArray&>(array).GetView(i);
  }
}

// Whether `array` is a dictionary whose values are string-like.
inline bool IsStringDictionary(const arrow::Array& array) {
  return array.type_id() == arrow::Type::DICTIONARY &&
         IsStringLike(static_cast<const arrow::DictionaryType&>(*array.type()).value_type()->id());
}

// Calls f(row, index) for every row of a dictionary array (index: int64; null
// rows too, with whatever index they hold), dispatching on the index type once.
template <typename F>
void ForEachDictionaryIndex(const arrow::DictionaryArray& array, F&& f) {
  const auto& indices = *array.indices();
  auto run = [&](const auto* values) {
    for (int64_t i = 0; i < indices.length(); ++i) f(i, static_cast<int64_t>(values[i]));
  };
  const auto& data = *indices.data();
  switch (indices.type_id()) {
    case arrow::Type::INT8:
      return run(data.GetValues<int8_t>(1));
    case arrow::Type::UINT8:
      return run(data.GetValues<uint8_t>(1));
    case arrow::Type::INT16:
      return run(data.GetValues<int16_t>(1));
    case arrow::Type::UINT16:
      return run(data.GetValues<uint16_t>(1));
    case arrow::Type::INT32:
      return run(data.GetValues<int32_t>(1));
    case arrow::Type::UINT32:
      return run(data.GetValues<uint32_t>(1));
    case arrow::Type::INT64:
      return run(data.GetValues<int64_t>(1));
    default:
      return run(data.GetValues<uint64_t>(1));
  }
}

}  // namespace shardfeed
