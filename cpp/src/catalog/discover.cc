#include "catalog/discover.h"

#include <cstring>

#include <arrow/buffer.h>

namespace shardfeed {

bool IsHiddenPath(const std::string& rel_path) {
  size_t start = 0;
  while (start < rel_path.size()) {
    const char c = rel_path[start];
    if (c == '_' || c == '.') return true;
    const size_t slash = rel_path.find('/', start);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return false;
}

bool HasParquetExtension(const std::string& name) {
  constexpr char kExt[] = ".parquet";
  const size_t n = sizeof(kExt) - 1;
  return name.size() >= n && name.compare(name.size() - n, n, kExt) == 0;
}

arrow::Result<bool> HasParquetMagic(arrow::io::RandomAccessFile& file, int64_t size) {
  constexpr int64_t kMagic = 4;
  // Header magic, footer length, footer magic: no Parquet file is shorter.
  if (size < 3 * kMagic) return false;
  for (const int64_t at : {int64_t{0}, size - kMagic}) {
    ARROW_ASSIGN_OR_RAISE(auto bytes, file.ReadAt(at, kMagic));
    if (bytes->size() != kMagic || std::memcmp(bytes->data(), "PAR1", kMagic) != 0) return false;
  }
  return true;
}

}  // namespace shardfeed
