#include "tier/decoded_tier_internal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <arrow/buffer.h>
#include <arrow/io/file.h>

#include "shardfeed/status.h"
#include "storage/folder.h"
#include "storage/posix_file.h"
#include "storage/temp_file.h"
#include "util/hash.h"

namespace shardfeed {

namespace {

// 0002: keys name the storage (CacheKey), names and digests are Hash64.
constexpr char kMagic[8] = {'S', 'F', 'D', 'T', '0', '0', '0', '2'};
constexpr char kLockName[] = "/shardfeed.lock";  // the temp-creation lock
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

bool IsTemp(const std::string& name) { return storage_internal::IsTempName(name); }

// Entries are "<hex>.sfd", temporaries ".tmp-<pid>-<n>.sfd"; other files in
// the folder are not the tier's.
bool IsEntryOrTemp(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".sfd") == 0;
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

DecodedTier::Impl::Impl(std::string dir, int64_t limit, int64_t used)
    : dir_(std::move(dir)), limit_(limit), used_(used) {}

DecodedTier::DecodedTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DecodedTier::~DecodedTier() = default;

arrow::Result<std::shared_ptr<DecodedTier>> DecodedTier::Open(const std::string& dir,
                                                              int64_t limit_bytes) {
  ARROW_RETURN_NOT_OK(storage_internal::MakePrivateFolder(dir, "decoded cache folder"));
  // Temps of dead writers go (storage/temp_file.h); live ones stay and count.
  ARROW_ASSIGN_OR_RAISE(
      auto creation,
      storage_internal::LockTempCreation(dir + kLockName, storage_internal::LockMode::kExclusive));
  int64_t used = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const std::string name = entry.path().filename().string();
    if (storage_internal::IsTempName(name) &&
        storage_internal::CleanTemp(entry.path().string()) != storage_internal::TempState::kInUse) {
      continue;
    }
    if (entry.is_regular_file(size_ec)) {
      const auto size = entry.file_size(size_ec);
      if (!size_ec) used += static_cast<int64_t>(size);
    }
  }
  return std::shared_ptr<DecodedTier>(
      new DecodedTier(std::make_unique<Impl>(dir, limit_bytes, used)));
}

std::string DecodedTier::Impl::Key(const Catalog& catalog, int32_t rg, const Layout& layout) {
  const auto& row_group = catalog.row_groups()[static_cast<size_t>(rg)];
  const auto& file = catalog.files()[static_cast<size_t>(row_group.file)];
  std::ostringstream key;
  key.precision(17);
  key << "v2|" << CacheKey(catalog, row_group.file) << '|' << file.size << '|' << file.version
      << "|rg" << row_group.row_group;
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

std::string DecodedTier::Impl::PathOf(const std::string& key) const {
  return dir_ + "/" + Hex64(Hash64(key)) + ".sfd";
}

arrow::Result<std::optional<std::vector<DecodedColumn>>> DecodedTier::Impl::Load(
    const std::string& key) {
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
    StreamingHash check;
    for (size_t k = 0; k < out.size(); ++k) {
      const Record& r = records[k];
      check.Update(out[k].values, static_cast<size_t>(r.values_bytes));
      if (r.rows > 0) {
        check.Update(p + r.starts_offset, static_cast<size_t>(r.rows) * 8);
        check.Update(p + r.lengths_offset, static_cast<size_t>(r.rows) * 8);
      }
      if (r.nulls_bytes > 0) check.Update(p + r.nulls_offset, static_cast<size_t>(r.nulls_bytes));
    }
    if (check.Digest() != digest) {
      ++corrupt_;
      return miss();  // damaged: decode again (and the store below replaces it)
    }
    std::lock_guard<std::mutex> lock(mu_);
    verified_.insert(key);
  }
  ++hits_;
  return std::optional<std::vector<DecodedColumn>>(std::move(out));
}

namespace {

// Writes an entry by the temp-file protocol (storage/temp_file.h).
arrow::Status WriteEntry(const std::string& dir, const std::string& path, const std::string& header,
                         const std::vector<DecodedColumn>& columns,
                         const std::vector<Record>& records, int64_t rows, int64_t total) {
  storage_internal::TempFile temp;
  {
    // Shared with other writers; a cleaner (Open) holds it exclusively.
    ARROW_ASSIGN_OR_RAISE(auto creation, storage_internal::LockTempCreation(
                                             dir + kLockName, storage_internal::LockMode::kShared));
    ARROW_ASSIGN_OR_RAISE(
        temp, storage_internal::TempFile::Create(storage_internal::TempPath(dir, "tier", ".sfd")));
  }
  int64_t end = 0;  // of the data written so far
  auto write_at = [&](int64_t at, const void* data, int64_t bytes) {
    end = std::max(end, at + bytes);
    return storage_internal::WriteAllAt(temp.fd(), static_cast<const uint8_t*>(data), bytes, at,
                                        temp.path());
  };
  ARROW_RETURN_NOT_OK(write_at(0, header.data(), static_cast<int64_t>(header.size())));
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    const auto& r = records[i];
    ARROW_RETURN_NOT_OK(write_at(r.values_offset, c.values, r.values_bytes));
    if (r.rows > 0) {
      ARROW_RETURN_NOT_OK(write_at(r.starts_offset, c.list_starts.data(), rows * 8));
      ARROW_RETURN_NOT_OK(write_at(r.lengths_offset, c.list_lengths.data(), rows * 8));
    }
    if (r.nulls_bytes > 0) {
      ARROW_RETURN_NOT_OK(write_at(r.nulls_offset, c.nulls.data(), r.nulls_bytes));
    }
  }
  // Pad the last buffer to its aligned end; a buffer that ends there already
  // must keep its last byte (a zero written over it made every entry whose
  // last buffer was a multiple of 64 bytes fail its digest: never a hit).
  if (end < total) {
    const char zero = 0;
    ARROW_RETURN_NOT_OK(write_at(total - 1, &zero, 1));
  }
  return temp.Commit(path);
}

}  // namespace

void DecodedTier::Impl::Store(const std::string& key, const std::vector<DecodedColumn>& columns,
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
  StreamingHash hash;
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    hash.Update(c.values, static_cast<size_t>(records[i].values_bytes));
    if (records[i].rows > 0) {
      hash.Update(c.list_starts.data(), static_cast<size_t>(rows) * 8);
      hash.Update(c.list_lengths.data(), static_cast<size_t>(rows) * 8);
    }
    if (records[i].nulls_bytes > 0) hash.Update(c.nulls.data(), static_cast<size_t>(c.count));
  }
  const uint64_t digest = hash.Digest();
  Append(&header, &digest, 8);
  const std::string path = PathOf(key);
  auto status = WriteEntry(dir_, path, header, columns, records, rows, total);
  if (!status.ok()) {
    used_ -= total;
    ++skipped_;
    if (!warned_.exchange(true)) {
      std::cerr << "shardfeed: cannot write the decoded cache in '" << dir_
                << "' (disk full?): " << status.message() << "; reading without it\n";
    }
    return;
  }
  stored_ += total;
}

DecodedTierStats DecodedTier::Impl::stats() const {
  return {hits_.load(),    misses_.load(), stored_.load(),
          skipped_.load(), used_.load(),   corrupt_.load()};
}

DecodedTierStats DecodedTier::stats() const { return impl_->stats(); }

const std::string& DecodedTier::dir() const { return impl_->dir_; }

arrow::Result<DecodedTierUsage> DecodedTier::Usage() const {
  DecodedTierUsage usage;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(impl_->dir_, ec)) {
    std::error_code size_ec;
    const std::string name = entry.path().filename().string();
    if (!IsEntryOrTemp(name) || !entry.is_regular_file(size_ec)) continue;
    const auto size = entry.file_size(size_ec);
    if (size_ec) continue;  // removed meanwhile
    usage.bytes += static_cast<int64_t>(size);
    if (!IsTemp(name)) ++usage.entries;
  }
  if (ec) {
    return Error(ErrorKind::kStorage,
                 "cannot list decoded cache folder '" + impl_->dir_ + "': " + ec.message());
  }
  return usage;
}

arrow::Result<int64_t> DecodedTier::Clear() {
  int64_t freed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(impl_->dir_, ec)) {
    std::error_code file_ec;
    const std::string name = entry.path().filename().string();
    if (!IsEntryOrTemp(name) || IsTemp(name) || !entry.is_regular_file(file_ec)) continue;
    const auto size = entry.file_size(file_ec);
    if (file_ec || !std::filesystem::remove(entry.path(), file_ec) || file_ec) continue;
    freed += static_cast<int64_t>(size);
  }
  if (ec) {
    return Error(ErrorKind::kStorage,
                 "cannot list decoded cache folder '" + impl_->dir_ + "': " + ec.message());
  }
  // This process's account of the folder; other processes' entries may be
  // among the freed bytes, so it stops at zero.
  int64_t used = impl_->used_.load();
  while (!impl_->used_.compare_exchange_weak(used, std::max<int64_t>(0, used - freed))) {
  }
  // An entry stored again later (by any process) must be checked again.
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->verified_.clear();
  return freed;
}

}  // namespace shardfeed
