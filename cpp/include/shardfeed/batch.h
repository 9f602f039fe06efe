// What the engine hands out: a batch of named, densely packed arrays.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>

namespace shardfeed {

enum class DType : int {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
};

size_t DTypeSize(DType t);
const char* DTypeName(DType t);                        // numpy's names: "float32", "bool", ...
bool ParseDType(const std::string& name, DType* out);  // the inverse of DTypeName

// One 64-byte-aligned allocation that a batch array owns.  The binding hands
// it to Python with an owner capsule; the count of live buffers lets tests
// check that every buffer is freed exactly once.
class OutputBuffer {
 public:
  // OutOfMemory when the pool cannot supply `size` bytes.
  static arrow::Result<std::shared_ptr<OutputBuffer>> Make(size_t size);
  ~OutputBuffer();
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* As() {
    return reinterpret_cast<T*>(data_);
  }

  static int64_t live_count();

 private:
  OutputBuffer(uint8_t* data, size_t size);
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  static std::atomic<int64_t> live_;
};

struct OutputArray {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // C-contiguous
  std::shared_ptr<OutputBuffer> buffer;
};

struct Batch {
  int64_t index = 0;  // batch number within the rank's epoch
  int64_t num_rows = 0;
  std::vector<OutputArray> arrays;
};

}  // namespace shardfeed
