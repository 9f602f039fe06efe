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

// Memory that batch buffers come from instead of the engine's pool when an
// engine has one: for pin_memory=True, page-locked slabs that the Python layer
// takes from torch's CUDA host allocator.  Thread-safe.
class OutputArena {
 public:
  virtual ~OutputArena() = default;
  // `size` bytes, 64-byte aligned, or nullptr when the arena has no room (the
  // buffer then comes from the engine's pool, and the arena counts a miss).
  virtual uint8_t* Allocate(size_t size) = 0;
  // Gives back a block that Allocate returned.
  virtual void Free(uint8_t* data, size_t size) = 0;
};

// One 64-byte-aligned allocation that a batch array owns.  The binding hands
// it to Python with an owner capsule; the count of live buffers lets tests
// check that every buffer is freed exactly once.
class OutputBuffer {
 public:
  // From `arena` when it has room, else from the engine's pool; OutOfMemory
  // when the pool cannot supply `size` bytes.  The buffer keeps the arena alive.
  static arrow::Result<std::shared_ptr<OutputBuffer>> Make(
      size_t size, std::shared_ptr<OutputArena> arena = nullptr);
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
  OutputBuffer(uint8_t* data, size_t size, std::shared_ptr<OutputArena> arena);
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<OutputArena> arena_;  // where data_ came from; null: the pool
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
