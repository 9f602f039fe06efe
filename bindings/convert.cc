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
      // A message names files: bytes that are not UTF-8 show as \xNN.
      const std::string& message = e.message();
      PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                            "backslashreplace");
      if (text == nullptr) return;  // (the decode's own error is set)
      PyErr_SetObject(cls.ptr(), text);
      Py_DECREF(text);
    }
  });
}

nb::str PathToPython(const std::string& path) {
  PyObject* text =
      PyUnicode_DecodeUTF8(path.data(), static_cast<Py_ssize_t>(path.size()), "surrogateescape");
  if (text == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(text);
}

std::string PathFromPython(const nb::str& path) {
  PyObject* bytes = PyUnicode_AsEncodedString(path.ptr(), "utf-8", "surrogateescape");
  if (bytes == nullptr) throw nb::python_error();
  const auto owned = nb::steal<nb::bytes>(bytes);
  return std::string(owned.c_str(), owned.size());
}

std::vector<std::string> PathsFromPython(const std::vector<nb::str>& paths) {
  std::vector<std::string> out;
  out.reserve(paths.size());
  for (const auto& path : paths) out.push_back(PathFromPython(path));
  return out;
}

nb::dict BatchToDict(const Batch& batch) {
  nb::dict out;
  for (const auto& array : batch.arrays) {
    out[array.name.c_str()] = WrapBuffer(array.buffer, array.shape, array.dtype);
  }
  return out;
}

}  // namespace shardfeed::py
