#include "numpy_array.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <arrow/c/dlpack_abi.h>
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

// The name of the capsule that keeps a batch buffer alive as an array's base.
constexpr const char* kBufferCapsule = "shardfeed.buffer";

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
  nb::capsule owner(holder, kBufferCapsule, [](void* p) noexcept {
    delete static_cast<std::shared_ptr<OutputBuffer>*>(p);
  });
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

namespace {

// A DLPack tensor over a batch buffer: what it points into stays alive
// through the buffer, not through a Python object.
struct ManagedBuffer {
  DLManagedTensor tensor{};
  std::shared_ptr<OutputBuffer> buffer;
  std::vector<int64_t> shape, strides;
};

void DeleteManaged(DLManagedTensor* self) {
  // No Python here: the consumer (torch) may call it from any thread, also
  // without the GIL and while the interpreter exits.
  delete static_cast<ManagedBuffer*>(self->manager_ctx);
}

bool DlpackType(int type_num, DLDataType* out) {
  const auto make = [out](DLDataTypeCode code, int bits) {
    *out = DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
    return true;
  };
  switch (type_num) {
    case NPY_BOOL:
      return make(kDLBool, 8);
    case NPY_INT8:
      return make(kDLInt, 8);
    case NPY_INT16:
      return make(kDLInt, 16);
    case NPY_INT32:
      return make(kDLInt, 32);
    case NPY_LONG:
    case NPY_LONGLONG:
      return make(kDLInt, 64);
    case NPY_UINT8:
      return make(kDLUInt, 8);
    case NPY_UINT16:
      return make(kDLUInt, 16);
    case NPY_UINT32:
      return make(kDLUInt, 32);
    case NPY_ULONG:
    case NPY_ULONGLONG:
      return make(kDLUInt, 64);
    case NPY_FLOAT16:
      return make(kDLFloat, 16);
    case NPY_FLOAT32:
      return make(kDLFloat, 32);
    case NPY_FLOAT64:
      return make(kDLFloat, 64);
    default:
      return false;
  }
}

}  // namespace

nb::object BufferDlpack(nb::handle value) {
  EnsureNumpy();
  if (!PyArray_Check(value.ptr())) return nb::none();
  auto* array = reinterpret_cast<PyArrayObject*>(value.ptr());
  // Views (a dtype view, a slice) have the array over the buffer as base.
  PyObject* base = PyArray_BASE(array);
  while (base != nullptr && PyArray_Check(base)) {
    base = PyArray_BASE(reinterpret_cast<PyArrayObject*>(base));
  }
  DLDataType dtype;
  if (base == nullptr || !PyCapsule_IsValid(base, kBufferCapsule) ||
      !DlpackType(PyArray_TYPE(array), &dtype) || PyArray_DESCR(array)->byteorder == '>') {
    return nb::none();
  }
  auto* holder =
      static_cast<std::shared_ptr<OutputBuffer>*>(PyCapsule_GetPointer(base, kBufferCapsule));
  if (holder == nullptr) throw nb::python_error();
  const int ndim = PyArray_NDIM(array);
  const int64_t item = PyArray_ITEMSIZE(array);
  auto managed = std::make_unique<ManagedBuffer>();
  managed->buffer = *holder;
  for (int d = 0; d < ndim; ++d) {
    const int64_t stride = PyArray_STRIDES(array)[d];
    if (item == 0 || stride % item != 0) return nb::none();
    managed->shape.push_back(PyArray_DIMS(array)[d]);
    managed->strides.push_back(stride / item);
  }
  DLTensor& t = managed->tensor.dl_tensor;
  t.data = PyArray_DATA(array);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = managed->shape.data();
  t.strides = managed->strides.data();
  t.byte_offset = 0;
  managed->tensor.manager_ctx = managed.get();
  managed->tensor.deleter = DeleteManaged;
  // A capsule not taken by a consumer (still "dltensor") frees the tensor.
  PyObject* capsule = PyCapsule_New(&managed->tensor, "dltensor", [](PyObject* c) {
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      mt->deleter(mt);
    }
  });
  if (capsule == nullptr) throw nb::python_error();
  managed.release();
  return nb::steal(capsule);
}

}  // namespace shardfeed::py
