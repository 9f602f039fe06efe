#include "catalog/convert.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/compute/cast.h>
#include <arrow/compute/initialize.h>
#include <arrow/extension/fixed_shape_tensor.h>
#include <arrow/extension_type.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/key_value_metadata.h>

#include "shardfeed/status.h"
#include "util/memory.h"
#include "util/string_array.h"
#include "util/struct_fields.h"

namespace shardfeed {

namespace {

// Arrow >= 21 registers its compute kernels on request; once per process.
arrow::Status InitCompute() {
  static const arrow::Status status = arrow::compute::Initialize();
  return status;
}

// The unscaled value of a decimal (little-endian, `width` bytes) when it fits
// in an int64.
bool SmallUnscaled(const uint8_t* bytes, int width, int64_t* out) {
  if constexpr (std::endian::native != std::endian::little) return false;
  if (width == 4) {
    int32_t v;
    std::memcpy(&v, bytes, 4);
    *out = v;
    return true;
  }
  int64_t low;
  std::memcpy(&low, bytes, 8);
  const uint64_t extension = low < 0 ? ~uint64_t{0} : 0;
  for (int at = 8; at < width; at += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + at, 8);
    if (word != extension) return false;
  }
  *out = low;
  return true;
}

// A decimal array as the nearest float64 of each value (Arrow's cast divides
// by a rounded power of ten: 3.00000 became 3.0000000000000004, so an exact
// filter on it missed).  An unscaled value below 2^53 and a power of ten up to
// 10^22 are both exact doubles, so one division or product rounds once;
// other values go through their decimal text, which strtod rounds exactly.
arrow::Result<std::shared_ptr<arrow::Array>> DecimalToDouble(const arrow::Array& array) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const auto& fixed = static_cast<const arrow::FixedSizeBinaryArray&>(array);
  const int scale = static_cast<const arrow::DecimalType&>(*array.type()).scale();
  const int width = fixed.byte_width();
  arrow::DoubleBuilder builder(EnginePool());
  ARROW_RETURN_NOT_OK(builder.Reserve(array.length()));
  for (int64_t i = 0; i < array.length(); ++i) {
    if (array.IsNull(i)) {
      builder.UnsafeAppendNull();
      continue;
    }
    int64_t unscaled = 0;
    constexpr int64_t kExact = int64_t{1} << 53;
    if (SmallUnscaled(fixed.GetValue(i), width, &unscaled) && unscaled < kExact &&
        unscaled > -kExact && scale >= -22 && scale <= 22) {
      const double v = static_cast<double>(unscaled);
      builder.UnsafeAppend(scale >= 0 ? v / kPow10[scale] : v * kPow10[-scale]);
      continue;
    }
    std::string text;
    switch (array.type_id()) {
      case arrow::Type::DECIMAL32:
        text = static_cast<const arrow::Decimal32Array&>(array).FormatValue(i);
        break;
      case arrow::Type::DECIMAL64:
        text = static_cast<const arrow::Decimal64Array&>(array).FormatValue(i);
        break;
      case arrow::Type::DECIMAL128:
        text = static_cast<const arrow::Decimal128Array&>(array).FormatValue(i);
        break;
      default:
        text = static_cast<const arrow::Decimal256Array&>(array).FormatValue(i);
        break;
    }
    builder.UnsafeAppend(std::strtod(text.c_str(), nullptr));
  }
  return builder.Finish();
}

// A fixed-size list's size; 0 for other lists.
int64_t ListSize(const arrow::BaseListType& list) {
  return list.id() == arrow::Type::FIXED_SIZE_LIST
             ? static_cast<const arrow::FixedSizeListType&>(list).list_size()
             : 0;
}

// A list (`id`: list, large list or fixed-size list of `size`) of `field`.
std::shared_ptr<arrow::DataType> ListOf(arrow::Type::type id, std::shared_ptr<arrow::Field> field,
                                        int64_t size) {
  if (id == arrow::Type::LIST) return arrow::list(std::move(field));
  if (id == arrow::Type::LARGE_LIST) return arrow::large_list(std::move(field));
  return arrow::fixed_size_list(std::move(field), static_cast<int32_t>(size));
}

// A list's offsets (`Offset`: int32 or int64), each times `b`.
template <typename Offset>
arrow::Result<std::shared_ptr<arrow::Buffer>> ScaledOffsets(const arrow::ArrayData& list,
                                                            int64_t b) {
  const int64_t count = list.offset + list.length + 1;
  ARROW_ASSIGN_OR_RAISE(
      std::shared_ptr<arrow::Buffer> buffer,
      arrow::AllocateBuffer(count * static_cast<int64_t>(sizeof(Offset)), EnginePool()));
  auto* scaled = reinterpret_cast<Offset*>(buffer->mutable_data());
  const Offset* offsets = list.buffers[1] ? list.GetValues<Offset>(1, 0) : nullptr;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t value = offsets ? static_cast<int64_t>(offsets[i]) : 0;
    if (value < 0 || (b > 0 && value > std::numeric_limits<Offset>::max() / b)) {
      return Error(ErrorKind::kUnsupportedType,
                   "a list of fixed-size lists holds more values in one row group than its "
                   "offsets can count (write it as a large_list)");
    }
    scaled[i] = static_cast<Offset>(value * b);
  }
  return buffer;
}

}  // namespace

std::shared_ptr<arrow::DataType> StorageType(const std::shared_ptr<arrow::DataType>& type) {
  if (type->id() == arrow::Type::EXTENSION) {
    return StorageType(static_cast<const arrow::ExtensionType&>(*type).storage_type());
  }
  // A list view (Parquet stores it as a LIST; only the Arrow schema says view) is
  // read as the list it is (ConformArray).
  if (type->id() == arrow::Type::LIST_VIEW) {
    return StorageType(arrow::list(static_cast<const arrow::ListViewType&>(*type).value_field()));
  }
  if (type->id() == arrow::Type::LARGE_LIST_VIEW) {
    return StorageType(
        arrow::large_list(static_cast<const arrow::LargeListViewType&>(*type).value_field()));
  }
  const auto id = type->id();
  if (!IsListType(id)) return type;
  const auto& list = static_cast<const arrow::BaseListType&>(*type);
  auto value = StorageType(list.value_type());
  int64_t size = ListSize(list);
  auto field = list.value_field();
  if (value->id() == arrow::Type::FIXED_SIZE_LIST) {
    // Fixed-size lists inside a list: one list of their values (CollapseFixedLists).
    const auto& inner = static_cast<const arrow::FixedSizeListType&>(*value);
    const int64_t collapsed = size * inner.list_size();
    if (collapsed > std::numeric_limits<int32_t>::max()) return type;
    size = collapsed;
    field = inner.value_field();
    value = inner.value_type();
  }
  if (value == list.value_type()) return type;
  return ListOf(id, field->WithType(std::move(value)), size);
}

std::string CollapsedShape(const arrow::DataType& type) {
  std::vector<std::string> dims;
  for (const arrow::DataType* t = &type;;) {
    if (t->id() == arrow::Type::EXTENSION) {
      const auto& extension = static_cast<const arrow::ExtensionType&>(*t);
      const auto* tensor = dynamic_cast<const arrow::extension::FixedShapeTensorType*>(t);
      if (tensor != nullptr) {
        // Its values in storage order: `shape` is the physical shape (a
        // permutation says how the logical view transposes it).
        for (const int64_t d : tensor->shape()) dims.push_back(std::to_string(d));
        break;
      }
      t = extension.storage_type().get();
      continue;
    }
    const auto id = t->id();
    if (!IsListType(id)) break;
    const auto& list = static_cast<const arrow::BaseListType&>(*t);
    if (id != arrow::Type::FIXED_SIZE_LIST && !dims.empty()) return "";  // stays nested
    dims.push_back(id == arrow::Type::FIXED_SIZE_LIST ? std::to_string(ListSize(list)) : "*");
    t = list.value_type().get();
  }
  if (dims.size() < 2) return "";
  std::string text = "[";
  for (size_t k = 0; k < dims.size(); ++k) text += (k ? ", " : "") + dims[k];
  return text + "]";
}

std::vector<int64_t> FixedShape(const arrow::Field& field) {
  const auto& metadata = field.metadata();
  if (!metadata || !metadata->Contains(kShapeKey)) return {};
  const std::string text = metadata->Get(kShapeKey).ValueOr("");
  std::vector<int64_t> dims;
  for (size_t at = 1; at < text.size();) {
    const size_t end = std::min(text.find_first_of(",]", at), text.size());
    const std::string dim = text.substr(at, end - at);
    char* stop = nullptr;
    const long long value = std::strtoll(dim.c_str(), &stop, 10);
    if (dim.empty() || stop == dim.c_str() || *stop != '\0' || value < 0) return {};
    dims.push_back(value);
    at = end + 1;
    while (at < text.size() && text[at] == ' ') ++at;
  }
  return dims.size() >= 2 ? dims : std::vector<int64_t>{};
}

arrow::Result<std::shared_ptr<arrow::Array>> CollapseFixedLists(
    const std::shared_ptr<arrow::Array>& array) {
  const auto id = array->type_id();
  if (!IsListType(id)) return array;
  const auto& data = *array->data();
  std::shared_ptr<arrow::Array> elements = arrow::MakeArray(data.child_data[0]);
  if (elements->type_id() == arrow::Type::EXTENSION) {
    elements = static_cast<const arrow::ExtensionArray&>(*elements).storage();
  }
  ARROW_ASSIGN_OR_RAISE(elements, CollapseFixedLists(elements));  // the deepest first
  const auto& list = static_cast<const arrow::BaseListType&>(*array->type());
  if (elements->type_id() != arrow::Type::FIXED_SIZE_LIST) {
    if (elements->data() == data.child_data[0]) return array;
    auto out = data.Copy();
    out->type = ListOf(id, list.value_field()->WithType(elements->type()), ListSize(list));
    out->child_data[0] = elements->data();
    return arrow::MakeArray(std::move(out));
  }
  // Element k of `inner` holds values [k * b, (k + 1) * b) of its values.
  const auto& inner = static_cast<const arrow::FixedSizeListArray&>(*elements);
  const auto& inner_type = static_cast<const arrow::FixedSizeListType&>(*inner.type());
  const int64_t b = inner_type.list_size();
  ARROW_ASSIGN_OR_RAISE(auto values,
                        inner.values()->SliceSafe(inner.offset() * b, inner.length() * b));
  if (inner.null_count() > 0 && b > 0 && values->type_id() != arrow::Type::NA) {
    // A null element makes its b values null.
    const int64_t at = values->offset();
    ARROW_ASSIGN_OR_RAISE(auto bitmap,
                          arrow::AllocateEmptyBitmap(at + values->length(), EnginePool()));
    uint8_t* bits = bitmap->mutable_data();
    for (int64_t k = 0; k < inner.length(); ++k) {
      if (!inner.IsValid(k)) continue;
      for (int64_t j = 0; j < b; ++j) {
        if (values->IsValid(k * b + j)) arrow::bit_util::SetBit(bits, at + k * b + j);
      }
    }
    auto masked = values->data()->Copy();
    masked->buffers[0] = std::move(bitmap);
    masked->null_count = arrow::kUnknownNullCount;
    values = arrow::MakeArray(std::move(masked));
  }
  auto out = data.Copy();
  out->child_data[0] = values->data();
  auto field = inner_type.value_field()->WithType(values->type());
  if (id == arrow::Type::FIXED_SIZE_LIST) {
    const int64_t size = ListSize(list) * b;
    if (size > std::numeric_limits<int32_t>::max()) {
      return Error(ErrorKind::kUnsupportedType,
                   "a fixed-size list of " + std::to_string(size) + " values is too long");
    }
    out->type = ListOf(id, std::move(field), size);
    return arrow::MakeArray(std::move(out));
  }
  // A list's offsets count elements: times b, they count values.
  if (id == arrow::Type::LIST) {
    ARROW_ASSIGN_OR_RAISE(out->buffers[1], ScaledOffsets<int32_t>(data, b));
    out->type = arrow::list(std::move(field));
  } else {
    ARROW_ASSIGN_OR_RAISE(out->buffers[1], ScaledOffsets<int64_t>(data, b));
    out->type = arrow::large_list(std::move(field));
  }
  return arrow::MakeArray(std::move(out));
}

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
  if (array->type_id() == arrow::Type::EXTENSION) {  // read as its storage (StorageType)
    return ConformArray(static_cast<const arrow::ExtensionArray&>(*array).storage(), read_type);
  }
  if (array->type_id() == arrow::Type::LIST_VIEW ||
      array->type_id() == arrow::Type::LARGE_LIST_VIEW) {  // as a list (StorageType)
    // The list of the same elements; what they become (fixed-size lists
    // collapsed, extensions their storage) is for the steps below.
    ARROW_ASSIGN_OR_RAISE(auto as_list, ViewAsList(array));
    return ConformArray(as_list, read_type);
  }
  if (arrow::is_list_like(array->type_id()) && array->type_id() != arrow::Type::MAP) {
    // Fixed-size lists inside lists: one list of their values (StorageType).
    ARROW_ASSIGN_OR_RAISE(auto collapsed, CollapseFixedLists(array));
    if (collapsed != array) return ConformArray(collapsed, read_type);
  }
  // Strings are only ever hashed, and the hasher maps a dictionary's values
  // once (pandas and polars categoricals): decoding them would only cost.
  if (IsStringDictionary(*array) && IsStringLike(read_type->id())) return array;
  if (arrow::is_list(array->type_id()) && array->type_id() == read_type->id()) {
    const auto& have = static_cast<const arrow::BaseListType&>(*array->type());
    const auto& want = static_cast<const arrow::BaseListType&>(*read_type);
    if (have.value_type()->Equals(*want.value_type())) return array;
  }
  if (arrow::is_decimal(array->type_id()) && read_type->id() == arrow::Type::DOUBLE) {
    return DecimalToDouble(*array);
  }
  if (arrow::is_list_like(array->type_id()) && array->type_id() == read_type->id() &&
      array->type_id() != arrow::Type::MAP) {
    // A list of decimals: its values as above, the offsets and nulls as they are.
    const auto& want = static_cast<const arrow::BaseListType&>(*read_type);
    auto data = array->data()->Copy();
    ARROW_ASSIGN_OR_RAISE(auto values,
                          ConformArray(arrow::MakeArray(data->child_data[0]), want.value_type()));
    if (values->type()->Equals(*want.value_type())) {
      data->type = read_type;
      data->child_data[0] = values->data();
      return arrow::MakeArray(data);
    }
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
    // Checked as a file's values are (a folder's k=300 into an int8 column
    // is an error, not 44): Scalar::CastTo would wrap.
    ARROW_ASSIGN_OR_RAISE(auto cast, arrow::compute::Cast(arrow::Datum(value), type,
                                                          arrow::compute::CastOptions::Safe()));
    typed = cast.scalar();
  }
  return arrow::MakeArrayFromScalar(*typed, length, EnginePool());
}

}  // namespace shardfeed
