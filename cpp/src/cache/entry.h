// Cache entries on disk: their names, their metadata file and their checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/result.h>

namespace shardfeed::cache_internal {

// The file-name stem of the entry for `key`: 32 lowercase hex digits, so no
// key can name a path outside the folder.  Not collision-proof; the metadata
// records the key, and an entry whose key differs is treated as missing.
std::string EntryName(const std::string& key);

// Whether `stem` has the form EntryName returns.
bool IsEntryName(std::string_view stem);

// What <h>.meta records about <h>.data.
struct EntryMeta {
  std::string key;
  int64_t size = 0;
  std::string version;
  uint64_t checksum = 0;  // XXH3-64 of the bytes

  bool operator==(const EntryMeta&) const = default;
};

// A small text file: a header line, then key=value lines (values escaped, so
// a key with a newline cannot forge a field).  No pickle, nothing executable.
std::string FormatMeta(const EntryMeta& meta);

// nullopt for anything but a complete, well-formed description.
std::optional<EntryMeta> ParseMeta(std::string_view text);

// Streaming XXH3-64 of a file's bytes.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;

  void Reset();
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The checksum of the first `size` bytes of `fd` (read with pread); an error
// if the file is shorter.
arrow::Result<uint64_t> ChecksumOfFd(int fd, int64_t size);

}  // namespace shardfeed::cache_internal
