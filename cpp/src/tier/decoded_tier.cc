#include "tier/decoded_tier.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <arrow/buffer.h>
#include <arrow/io/file.h>

#include "shardfeed/status.h"
#include "util/hash.h"

namespace shardfeed {

namespace {

constexpr char kMagic[8] = {'S', 'F', 'D', 'T', '0', '0', '0', '1'};
constexpr int64_t kAlign = 64;

// A column's fixed-size record in the file.
struct Record {
  int32_t dtype;
  int32_t from_strings;
  int64_t count;
  int64_t list_size;
  int64_t rows;  // > 0 for variable-length lists (starts and lengths follow)
  int64_t values_offset, values_bytes;
  int64_t starts_offset, lengths_offset;  // rows * 8 bytes each
  int64_t nulls_offset, nulls_bytes;      // count bytes, or 0
};

int64_t Align(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A fast 64-bit digest of a byte range, eight bytes at a time.
uint64_t Digest(const uint8_t* p, int64_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(n);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h ^ (h >> 32);
}

// Whether the process named in a temp file's name (".tmp-<pid>-...") is gone.
bool OwnerIsGone(const std::string& name) {
  const auto pid = std::strtol(name.c_str() + 5, nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

void Append(std::string* out, const void* data, size_t n) {
  out->append(static_cast<const char*>(data), n);
}

std::string Spec(const TransformSpec& t) {
  std::ostringstream out;
  out.precision(17);
  out << TransformOpName(t.op) << '(' << t.a << ',' << t.b << ',' << t.n << ','
      << DTypeName(t.dtype);
  for (double b : t.boundaries) out << ',' << b;
  // A vocabulary by its digest: the key stays short for any number of values.
  if (t.vocabulary) out << ",vocab:" << t.vocabulary->size() << ':' << t.vocabulary->digest();
  out << ')';
  return out.str();
}

}  // namespace

size_t DeterministicPrefix(const Layout& layout, size_t field) {
  size_t n = 0;
  for (size_t t : layout.field_transforms[field]) {
    if (IsRandom(layout.transforms[t].op)) break;
    ++n;
  }
  return n;
}

DecodedTier::DecodedTier(std::string dir, int64_t limit, int64_t used)
    : dir_(std::move(dir)), limit_(limit), used_(used) {}

arrow::Result<std::shared_ptr<DecodedTier>> DecodedTier::Open(const std::string& dir,
                                                              int64_t limit_bytes) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return Error(ErrorKind::kInvalidArgument, "decoded cache folder '" + dir + "' is not a folder");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Error(ErrorKind::kStorage,
                 "cannot create decoded cache folder '" + dir + "': " + ec.message());
  }
  ::chmod(dir.c_str(), 0700);
  int64_t used = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0 && OwnerIsGone(name)) {
      std::filesystem::remove(entry.path(), size_ec);  // left by a killed writer
      continue;
    }
    if (entry.is_regular_file(size_ec)) {
      const auto size = entry.file_size(size_ec);
      if (!size_ec) used += static_cast<int64_t>(size);
    }
  }
  return std::shared_ptr<DecodedTier>(new DecodedTier(dir, limit_bytes, used));
}

std::string DecodedTier::Key(const Catalog& catalog, int32_t rg, const Layout& layout) {
  const auto& row_group = catalog.row_groups()[static_cast<size_t>(rg)];
  const auto& file = catalog.files()[static_cast<size_t>(row_group.file)];
  std::ostringstream key;
  key.precision(17);
  key << "v1|" << catalog.filesystem()->type_name() << '|' << file.path << '|' << file.size << '|'
      << file.version << "|rg" << row_group.row_group;
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    key << '|' << layout.field_names[i] << ':' << DTypeName(layout.field_raw_dtypes[i])
        << (layout.field_from_strings[i] ? "/str" : "");
    const size_t prefix = DeterministicPrefix(layout, i);
    for (size_t k = 0; k < prefix; ++k) {
      key << ';' << Spec(layout.transforms[layout.field_transforms[i][k]]);
    }
  }
  return key.str();
}

std::string DecodedTier::PathOf(const std::string& key) const {
  StableHash h;
  h.Update(key);
  return dir_ + "/" + h.HexDigest() + ".sfd";
}

arrow::Result<std::optional<std::vector<DecodedColumn>>> DecodedTier::Load(const std::string& key) {
  const std::string path = PathOf(key);
  auto maybe_file = arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
  auto miss = [&]() -> std::optional<std::vector<DecodedColumn>> {
    ++misses_;
    return std::nullopt;
  };
  if (!maybe_file.ok()) return miss();
  auto file = *maybe_file;
  ARROW_ASSIGN_OR_RAISE(int64_t size, file->GetSize());
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> all, file->ReadAt(0, size));
  const uint8_t* p = all->data();
  int64_t pos = 0;
  auto take = [&](void* out, int64_t n) {
    if (pos + n > size) return false;
    std::memcpy(out, p + pos, static_cast<size_t>(n));
    pos += n;
    return true;
  };
  char magic[8];
  uint64_t key_len = 0, columns = 0;
  if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !take(&key_len, 8) ||
      static_cast<int64_t>(key_len) > size - pos ||
      std::string_view(reinterpret_cast<const char*>(p + pos), key_len) != key) {
    return miss();
  }
  pos += static_cast<int64_t>(key_len);
  if (!take(&columns, 8) || columns > (1u << 20)) return miss();
  std::vector<DecodedColumn> out(columns);
  std::vector<Record> records(columns);
  for (auto& r : records) {
    if (!take(&r, sizeof(r))) return miss();
  }
  uint64_t digest = 0;
  if (!take(&digest, 8)) return miss();
  for (size_t k = 0; k < out.size(); ++k) {
    auto& c = out[k];
    const Record& r = records[k];
    auto in_file = [&](int64_t off, int64_t n) { return off >= 0 && n >= 0 && off + n <= size; };
    if (!in_file(r.values_offset, r.values_bytes) || !in_file(r.nulls_offset, r.nulls_bytes) ||
        (r.rows > 0 &&
         (!in_file(r.starts_offset, r.rows * 8) || !in_file(r.lengths_offset, r.rows * 8))) ||
        r.dtype < 0 || r.dtype > static_cast<int32_t>(DType::kFloat64) ||
        r.values_bytes != r.count * static_cast<int64_t>(DTypeSize(static_cast<DType>(r.dtype)))) {
      return miss();
    }
    c.dtype = static_cast<DType>(r.dtype);
    c.from_strings = r.from_strings != 0;
    c.count = r.count;
    c.list_size = r.list_size;
    c.owned = arrow::SliceBuffer(all, r.values_offset, r.values_bytes);  // read-only map
    c.values = c.owned->data();
    if (r.rows > 0) {
      c.list_starts.resize(static_cast<size_t>(r.rows));
      c.list_lengths.resize(static_cast<size_t>(r.rows));
      std::memcpy(c.list_starts.data(), p + r.starts_offset, static_cast<size_t>(r.rows) * 8);
      std::memcpy(c.list_lengths.data(), p + r.lengths_offset, static_cast<size_t>(r.rows) * 8);
    }
    if (r.nulls_bytes > 0) {
      c.nulls.assign(p + r.nulls_offset, p + r.nulls_offset + r.nulls_bytes);
    }
  }
  bool verified;
  {
    std::lock_guard<std::mutex> lock(mu_);
    verified = verified_.count(key) > 0;
  }
  if (!verified) {
    uint64_t check = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      const auto& c = out[k];
      const Record& r = records[k];
      check = check * 31 + Digest(c.values, r.values_bytes);
      if (r.rows > 0) {
        check = check * 31 + Digest(p + r.starts_offset, r.rows * 8);
        check = check * 31 + Digest(p + r.lengths_offset, r.rows * 8);
      }
      if (r.nulls_bytes > 0) check = check * 31 + Digest(p + r.nulls_offset, r.nulls_bytes);
    }
    if (check != digest) {
      ++corrupt_;
      return miss();  // damaged: decode again (and the store below replaces it)
    }
    std::lock_guard<std::mutex> lock(mu_);
    verified_.insert(key);
  }
  ++hits_;
  return std::optional<std::vector<DecodedColumn>>(std::move(out));
}

void DecodedTier::Store(const std::string& key, const std::vector<DecodedColumn>& columns,
                        int64_t rows) {
  // Header first, then buffers at aligned offsets computed up front.
  std::string header(kMagic, 8);
  const uint64_t key_len = key.size(), n = columns.size();
  Append(&header, &key_len, 8);
  header += key;
  Append(&header, &n, 8);
  int64_t offset = Align(static_cast<int64_t>(header.size() + n * sizeof(Record) + 8));
  std::vector<Record> records;
  for (const auto& c : columns) {
    Record r{};
    r.dtype = static_cast<int32_t>(c.dtype);
    r.from_strings = c.from_strings ? 1 : 0;
    r.count = c.count;
    r.list_size = c.list_size;
    r.values_bytes = c.count * static_cast<int64_t>(DTypeSize(c.dtype));
    r.values_offset = offset;
    offset = Align(offset + r.values_bytes);
    if (!c.list_lengths.empty()) {
      r.rows = rows;
      r.starts_offset = offset;
      offset = Align(offset + rows * 8);
      r.lengths_offset = offset;
      offset = Align(offset + rows * 8);
    }
    if (c.has_nulls()) {
      r.nulls_bytes = c.count;
      r.nulls_offset = offset;
      offset = Align(offset + c.count);
    }
    records.push_back(r);
  }
  const int64_t total = offset;
  // Reserve the space first, so that threads storing at once never overshoot.
  int64_t used = used_.load();
  do {
    if (limit_ > 0 && used + total > limit_) {
      ++skipped_;
      return;
    }
  } while (!used_.compare_exchange_weak(used, used + total));
  for (const auto& r : records) Append(&header, &r, sizeof(r));
  // The digest of every buffer, checked the first time a process loads the entry.
  uint64_t digest = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    digest = digest * 31 + Digest(c.values, records[i].values_bytes);
    if (records[i].rows > 0) {
      digest =
          digest * 31 + Digest(reinterpret_cast<const uint8_t*>(c.list_starts.data()), rows * 8);
      digest =
          digest * 31 + Digest(reinterpret_cast<const uint8_t*>(c.list_lengths.data()), rows * 8);
    }
    if (records[i].nulls_bytes > 0) digest = digest * 31 + Digest(c.nulls.data(), c.count);
  }
  Append(&header, &digest, 8);
  const std::string path = PathOf(key);
  const std::string temp = dir_ + "/.tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(reinterpret_cast<uintptr_t>(&records)) + ".sfd";
  bool ok = true;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    int64_t end = 0;  // of the data written so far
    auto write_at = [&](int64_t at, const void* data, int64_t bytes) {
      out.seekp(at);
      out.write(static_cast<const char*>(data), bytes);
      end = std::max(end, at + bytes);
    };
    write_at(0, header.data(), static_cast<int64_t>(header.size()));
    for (size_t i = 0; i < columns.size(); ++i) {
      const auto& c = columns[i];
      const auto& r = records[i];
      write_at(r.values_offset, c.values, r.values_bytes);
      if (r.rows > 0) {
        write_at(r.starts_offset, c.list_starts.data(), rows * 8);
        write_at(r.lengths_offset, c.list_lengths.data(), rows * 8);
      }
      if (r.nulls_bytes > 0) write_at(r.nulls_offset, c.nulls.data(), r.nulls_bytes);
    }
    // Pad the last buffer to its aligned end; a buffer that ends there already
    // must keep its last byte (a zero written over it made every entry whose
    // last buffer was a multiple of 64 bytes fail its digest: never a hit).
    if (end < total) {
      const char zero = 0;
      write_at(total - 1, &zero, 1);
    }
    out.flush();
    ok = static_cast<bool>(out);
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(temp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(temp, ec);
    used_ -= total;
    ++skipped_;
    if (!warned_.exchange(true)) {
      std::cerr << "shardfeed: cannot write the decoded cache in '" << dir_
                << "' (disk full?); reading without it\n";
    }
    return;
  }
  stored_ += total;
}

DecodedTierStats DecodedTier::stats() const {
  return {hits_.load(),    misses_.load(), stored_.load(),
          skipped_.load(), used_.load(),   corrupt_.load()};
}

}  // namespace shardfeed
