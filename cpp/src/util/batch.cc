#include "shardfeed/batch.h"

#include <cstdlib>
#include <utility>

#include "util/memory.h"

namespace shardfeed {

std::atomic<int64_t> OutputBuffer::live_{0};

arrow::Result<std::shared_ptr<OutputBuffer>> OutputBuffer::Make(
    size_t size, std::shared_ptr<OutputArena> arena) {
  if (arena) {
    if (uint8_t* data = arena->Allocate(size == 0 ? 1 : size)) {
      return std::shared_ptr<OutputBuffer>(new OutputBuffer(data, size, std::move(arena)));
    }
  }
  // From the engine's pool, which keeps freed pages for the next batch instead
  // of faulting in fresh ones every time.
  uint8_t* data = nullptr;
  const auto bytes = static_cast<int64_t>(size == 0 ? 1 : size);
  if (!EnginePool()->Allocate(bytes, 64, &data).ok()) {
    return arrow::Status::OutOfMemory("cannot allocate an output buffer of ", bytes, " bytes");
  }
  return std::shared_ptr<OutputBuffer>(new OutputBuffer(data, size, nullptr));
}

OutputBuffer::OutputBuffer(uint8_t* data, size_t size, std::shared_ptr<OutputArena> arena)
    : data_(data), size_(size), arena_(std::move(arena)) {
  live_.fetch_add(1, std::memory_order_relaxed);
}

OutputBuffer::~OutputBuffer() {
  if (arena_) {
    arena_->Free(data_, size_ == 0 ? 1 : size_);
  } else {
    EnginePool()->Free(data_, static_cast<int64_t>(size_ == 0 ? 1 : size_), 64);
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
}

int64_t OutputBuffer::live_count() { return live_.load(std::memory_order_relaxed); }

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kUInt16:
      return "uint16";
    case DType::kUInt32:
      return "uint32";
    case DType::kUInt64:
      return "uint64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "?";
}

bool ParseDType(const std::string& name, DType* out) {
  for (int i = 0; i <= static_cast<int>(DType::kFloat64); ++i) {
    if (name == DTypeName(static_cast<DType>(i))) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace shardfeed
