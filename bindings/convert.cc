#include "convert.h"

#include <nanobind/ndarray.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shardfeed/status.h"

namespace nb = nanobind;

namespace shardfeed::py {

StatusError::StatusError(arrow::Status status)
    : status_(std::move(status)), message_(status_.message()) {}

namespace {

const char* ClassName(const arrow::Status& status) {
  if (status.IsCancelled()) return "LoaderClosedError";
  if (status.IsOutOfMemory()) return "MemoryError";
  switch (KindOf(status)) {
    case ErrorKind::kNotFound:
      return "DatasetNotFoundError";
    case ErrorKind::kInvalidData:
      return "InvalidDataError";
    case ErrorKind::kSchemaMismatch:
      return "SchemaMismatchError";
    case ErrorKind::kColumnNotFound:
      return "ColumnNotFoundError";
    case ErrorKind::kUnsupportedType:
      return "UnsupportedTypeError";
    case ErrorKind::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorKind::kStateMismatch:
      return "StateDictError";
    case ErrorKind::kStorage:
      return "StorageError";
  }
  return "StorageError";
}

nb::dlpack::dtype ToDLPack(DType t) {
  using nb::dlpack::dtype_code;
  const auto bits = static_cast<uint8_t>(DTypeSize(t) * 8);
  switch (t) {
    case DType::kBool:
      return {static_cast<uint8_t>(dtype_code::Bool), 8, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
  }
  return {};
}

}  // namespace

void RegisterErrorTranslator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const char* name = ClassName(e.status());
      if (std::string(name) == "MemoryError") {
        PyErr_SetString(PyExc_MemoryError, e.what());
        return;
      }
      nb::object errors = nb::module_::import_("shardfeed._errors");
      nb::object cls = errors.attr(name);
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
}

nb::dict BatchToDict(const Batch& batch) {
  nb::dict out;
  for (const auto& array : batch.arrays) {
    auto* holder = new std::shared_ptr<OutputBuffer>(array.buffer);
    nb::capsule owner(
        holder, [](void* p) noexcept { delete static_cast<std::shared_ptr<OutputBuffer>*>(p); });
    std::vector<size_t> shape(array.shape.begin(), array.shape.end());
    nb::ndarray<nb::numpy> nd(array.buffer->data(), shape.size(), shape.data(), owner, nullptr,
                              ToDLPack(array.dtype));
    out[array.name.c_str()] = nd.cast();
  }
  return out;
}

}  // namespace shardfeed::py
