#include "convert.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "numpy_array.h"
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
    out[array.name.c_str()] = WrapBuffer(array.buffer, array.shape, array.dtype);
  }
  return out;
}

}  // namespace shardfeed::py
