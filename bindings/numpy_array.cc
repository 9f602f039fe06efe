#include "numpy_array.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <string>

namespace nb = nanobind;

namespace shardfeed::py {
namespace {

int TypeNum(DType t) {
  switch (t) {
    case DType::kBool:
      return NPY_BOOL;
    case DType::kInt8:
      return NPY_INT8;
    case DType::kInt16:
      return NPY_INT16;
    case DType::kInt32:
      return NPY_INT32;
    case DType::kInt64:
      return NPY_INT64;
    case DType::kUInt8:
      return NPY_UINT8;
    case DType::kUInt16:
      return NPY_UINT16;
    case DType::kUInt32:
      return NPY_UINT32;
    case DType::kUInt64:
      return NPY_UINT64;
    case DType::kFloat16:
      return NPY_FLOAT16;
    case DType::kFloat32:
      return NPY_FLOAT32;
    case DType::kFloat64:
      return NPY_FLOAT64;
  }
  return NPY_NOTYPE;
}

// NumPy's C API table, imported on first use (under the GIL).
void EnsureNumpy() {
  static bool imported = false;
  if (imported) return;
  if (_import_array() < 0) throw nb::python_error();
  imported = true;
}

}  // namespace

nb::object WrapBuffer(const std::shared_ptr<OutputBuffer>& buffer,
                      const std::vector<int64_t>& shape, DType dtype) {
  EnsureNumpy();
  auto* holder = new std::shared_ptr<OutputBuffer>(buffer);
  nb::capsule owner(
      holder, [](void* p) noexcept { delete static_cast<std::shared_ptr<OutputBuffer>*>(p); });
  std::vector<npy_intp> dims(shape.begin(), shape.end());
  PyArray_Descr* descr = PyArray_DescrFromType(TypeNum(dtype));  // a new reference
  if (descr == nullptr) throw nb::python_error();
  // Steals descr; the data stays the buffer's.
  PyObject* array =
      PyArray_NewFromDescr(&PyArray_Type, descr, static_cast<int>(dims.size()), dims.data(),
                           nullptr, buffer->data(), NPY_ARRAY_CARRAY, nullptr);
  if (array == nullptr) throw nb::python_error();
  nb::object out = nb::steal(array);
  // Steals a reference to the owner, also when it fails.
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), owner.release().ptr()) < 0) {
    throw nb::python_error();
  }
  return out;
}

}  // namespace shardfeed::py
