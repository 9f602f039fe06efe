#include "cache/entry.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <vector>

#include <unistd.h>

#include "storage/posix_file.h"
#include "util/hash.h"

namespace shardfeed::cache_internal {

namespace {

constexpr std::string_view kHeader = "shardfeed-cache-entry 1";

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == '%' || c == 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]);
    const int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

template <typename T>
std::optional<T> ParseNumber(std::string_view s, int base) {
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string EntryName(const std::string& key) { return Hex64(Hash64(key)); }

bool IsEntryName(std::string_view stem) {
  if (stem.size() != kEntryNameLength) return false;
  for (char c : stem) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string FormatMeta(const EntryMeta& meta) {
  char checksum[17];
  std::snprintf(checksum, sizeof(checksum), "%016llx",
                static_cast<unsigned long long>(meta.checksum));
  std::string out(kHeader);
  out += "\nkey=" + Escape(meta.key);
  out += "\nsize=" + std::to_string(meta.size);
  out += "\nversion=" + Escape(meta.version);
  out += "\nxxh3=" + std::string(checksum);
  out += "\n";
  return out;
}

std::optional<EntryMeta> ParseMeta(std::string_view text) {
  if (text.substr(0, kHeader.size()) != kHeader) return std::nullopt;
  text.remove_prefix(kHeader.size());
  EntryMeta meta;
  bool has_key = false, has_size = false, has_version = false, has_checksum = false;
  while (!text.empty()) {
    if (text.front() != '\n') return std::nullopt;
    text.remove_prefix(1);
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      if (!text.empty()) return std::nullopt;  // a line cut short: a torn write
      break;
    }
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = line.substr(0, eq);
    const std::string_view value = line.substr(eq + 1);
    if (name == "key") {
      auto v = Unescape(value);
      if (!v) return std::nullopt;
      meta.key = std::move(*v);
      has_key = true;
    } else if (name == "size") {
      auto v = ParseNumber<int64_t>(value, 10);
      if (!v || *v < 0) return std::nullopt;
      meta.size = *v;
      has_size = true;
    } else if (name == "version") {
      auto v = Unescape(value);
      if (!v) return std::nullopt;
      meta.version = std::move(*v);
      has_version = true;
    } else if (name == "xxh3") {
      auto v = ParseNumber<uint64_t>(value, 16);
      if (!v || value.size() != 16) return std::nullopt;
      meta.checksum = *v;
      has_checksum = true;
    }  // other names: fields of a later format version, ignored
  }
  if (!(has_key && has_size && has_version && has_checksum)) return std::nullopt;
  return meta;
}

arrow::Result<uint64_t> ChecksumOfFd(int fd, int64_t size) {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<char> buffer(static_cast<size_t>(std::min(kChunk, std::max<int64_t>(size, 1))));
  StreamingHash checksum;
  int64_t offset = 0;
  while (offset < size) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(kChunk, size - offset));
    const ssize_t got = ::pread(fd, buffer.data(), want, offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      return storage_internal::ErrnoError(errno, "cannot read a cache entry");
    }
    if (got == 0) return arrow::Status::IOError("cache entry is shorter than its metadata says");
    checksum.Update(buffer.data(), static_cast<size_t>(got));
    offset += got;
  }
  return checksum.Digest();
}

}  // namespace shardfeed::cache_internal
