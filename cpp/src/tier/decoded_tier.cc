#include "tier/decoded_tier_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <arrow/buffer.h>
#include <arrow/io/file.h>

#include "shardfeed/status.h"
#include "storage/folder.h"
#include "storage/posix_file.h"
#include "storage/temp_file.h"
#include "tier/superseded.h"
#include "tier/verified_stamp.h"
#include "util/file_identity.h"
#include "util/hash.h"
#include "util/watched_map.h"

namespace shardfeed {

namespace {

// 0002: keys name the storage (CacheKey), names and digests are Hash64.
// 0003: the header has its own digest (issue 10), checked before any field.
constexpr char kMagic[8] = {'S', 'F', 'D', 'T', '0', '0', '0', '3'};
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

// Bounds on numbers read from an entry: unsigned and overflow-checked, so that
// no value of a field can wrap around a check.
bool InFile(int64_t offset, int64_t bytes, uint64_t size) {
  if (offset < 0 || bytes < 0) return false;
  const auto off = static_cast<uint64_t>(offset), n = static_cast<uint64_t>(bytes);
  return off <= size && n <= size - off;
}

bool Aligned(int64_t offset) { return offset % kAlign == 0; }

// Whether a record's fields agree with each other and every buffer it names
// lies inside a file of `size` bytes, at an aligned offset.
bool ValidRecord(const Record& r, uint64_t size) {
  if (r.dtype < 0 || r.dtype > static_cast<int32_t>(DType::kFloat64) ||
      (r.from_strings != 0 && r.from_strings != 1) || r.count < 0 || r.list_size < 0 ||
      r.rows < 0) {
    return false;
  }
  int64_t values_bytes = 0;
  if (__builtin_mul_overflow(r.count, static_cast<int64_t>(DTypeSize(static_cast<DType>(r.dtype))),
                             &values_bytes) ||
      values_bytes != r.values_bytes || !Aligned(r.values_offset) ||
      !InFile(r.values_offset, r.values_bytes, size)) {
    return false;
  }
  if (r.list_size > 0 && (r.rows > 0 || r.count % r.list_size != 0)) return false;
  if (r.rows > 0) {
    int64_t list_bytes = 0;
    if (__builtin_mul_overflow(r.rows, int64_t{8}, &list_bytes) || !Aligned(r.starts_offset) ||
        !Aligned(r.lengths_offset) || !InFile(r.starts_offset, list_bytes, size) ||
        !InFile(r.lengths_offset, list_bytes, size)) {
      return false;
    }
  }
  return r.nulls_bytes == 0 ||
         (r.nulls_bytes == r.count && InFile(r.nulls_offset, r.nulls_bytes, size));
}

// The digest of every buffer of an entry: `at(k, part)` gives record k's part.
enum class Part { kValues, kStarts, kLengths, kNulls };
template <typename At>
uint64_t DataDigest(const std::vector<Record>& records, At&& at) {
  StreamingHash hash;
  for (size_t k = 0; k < records.size(); ++k) {
    const Record& r = records[k];
    hash.Update(at(k, Part::kValues), static_cast<size_t>(r.values_bytes));
    if (r.rows > 0) {
      hash.Update(at(k, Part::kStarts), static_cast<size_t>(r.rows) * 8);
      hash.Update(at(k, Part::kLengths), static_cast<size_t>(r.rows) * 8);
    }
    if (r.nulls_bytes > 0) hash.Update(at(k, Part::kNulls), static_cast<size_t>(r.nulls_bytes));
  }
  return hash.Digest();
}

int64_t OffsetOf(const Record& r, Part part) {
  return part == Part::kValues    ? r.values_offset
         : part == Part::kStarts  ? r.starts_offset
         : part == Part::kLengths ? r.lengths_offset
                                  : r.nulls_offset;
}

// Entries are "<16 hex>.sfd", temporaries ".tmp-<pid>-<n>.sfd"; other files in
// the folder are not the tier's (`cache clear` leaves a "report.sfd" alone).
bool IsEntryOrTemp(const std::string& name) {
  if (IsHexNamed(name, ".sfd")) return true;
  return IsTemp(name) && name.size() > 4 && name.compare(name.size() - 4, 4, ".sfd") == 0;
}

// An entry's lock file (LockEntry): 16 hex digits + ".lock" (not the
// folder's own kLockName).
bool IsLock(const std::string& name) { return IsHexNamed(name, ".lock"); }

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

DecodedTier::Impl::Impl(std::string dir, int64_t limit, int64_t used, bool read_only)
    : dir_(std::move(dir)),
      limit_(limit),
      read_only_(read_only),
      usage_(std::make_unique<UsageLedger>(dir_ + "/" + kUsageName, used)) {}

DecodedTier::DecodedTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DecodedTier::~DecodedTier() = default;

arrow::Result<std::shared_ptr<DecodedTier>> DecodedTier::Open(const std::string& dir,
                                                              int64_t limit_bytes) {
  ARROW_RETURN_NOT_OK(storage_internal::MakePrivateFolder(dir, "decoded cache folder"));
  // A folder this process cannot write (a read-only mount of a tier warmed
  // elsewhere, a folder without write permission): its entries are read, no
  // lock, stamp, ledger or entry is written, and misses are decoded each time.
  const bool read_only = ::faccessat(AT_FDCWD, dir.c_str(), W_OK, AT_EACCESS) != 0 &&
                         (errno == EROFS || errno == EACCES || errno == EPERM);
  // Temps of dead writers go (storage/temp_file.h); live ones stay and count.
  storage_internal::LockedFd creation;
  if (!read_only) {
    ARROW_ASSIGN_OR_RAISE(creation, storage_internal::LockTempCreation(
                                        dir + kLockName, storage_internal::LockMode::kExclusive));
  }
  int64_t used = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const std::string name = entry.path().filename().string();
    if (!read_only && storage_internal::IsTempName(name) &&
        storage_internal::CleanTemp(entry.path().string()) != storage_internal::TempState::kInUse) {
      continue;
    }
    // What Usage() counts: entries and live temps, not locks or the ledger.
    if (IsEntryOrTemp(name) && entry.is_regular_file(size_ec)) {
      const auto size = entry.file_size(size_ec);
      if (!size_ec) used += static_cast<int64_t>(size);
    }
  }
  return std::shared_ptr<DecodedTier>(
      new DecodedTier(std::make_unique<Impl>(dir, limit_bytes, used, read_only)));
}

std::string DecodedTier::Impl::Key(const Catalog& catalog, int32_t rg, const Layout& layout) {
  const auto& row_group = catalog.row_groups()[static_cast<size_t>(rg)];
  const auto& file = catalog.files()[static_cast<size_t>(row_group.file)];
  std::ostringstream key;
  key.precision(17);
  // v4: float transforms of integer columns compute from every digit (BeginFloatMath).
  key << kTierKeyTag << '|' << CacheKey(catalog, row_group.file) << '|' << file.size << '|'
      << file.version << "|rg" << row_group.row_group;
  // A local file rewritten at its size with its mtime set back (cp -p, rsync -t,
  // tar x) keeps both: its inode or change time, which no one can set back, tells.
  if (!file.identity.empty()) key << "|id" << file.identity;
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

std::string DecodedTier::Impl::LockPathOf(const std::string& key) const {
  return dir_ + "/" + Hex64(Hash64(key)) + ".lock";
}

arrow::Result<storage_internal::LockedFd> DecodedTier::Impl::LockEntry(
    const std::string& key, const std::function<bool()>& stopped,
    const std::function<bool()>& help) const {
  using storage_internal::LockMode, storage_internal::LockOutcome;
  if (read_only_) return storage_internal::LockedFd{};  // nothing is stored: no one to wait for
  const std::string path = LockPathOf(key);
  auto locked = storage_internal::OpenLockedWithin(path, O_RDWR | O_CREAT, LockMode::kExclusive,
                                                   kEntryLockWait, stopped, help);
  // A folder or FIFO where the lock file belongs: removed, then locked.
  if (!locked.ok() && storage_internal::RemoveIfNotRegular(path)) {
    locked = storage_internal::OpenLockedWithin(path, O_RDWR | O_CREAT, LockMode::kExclusive,
                                                kEntryLockWait, stopped, help);
  }
  if (!locked.ok()) return storage_internal::LockedFd{};  // no lock file: decode unlocked
  if (locked->outcome == LockOutcome::kLocked) return std::move(*locked);
  if (stopped && stopped()) return arrow::Status::Cancelled("loader stopped");
  return storage_internal::LockedFd{};  // waited kEntryLockWait: decode, unlocked
}

arrow::Result<std::optional<std::vector<DecodedColumn>>> DecodedTier::Impl::Load(
    const std::string& key, std::optional<uint64_t> stored_digest) {
  const bool just_stored = stored_digest.has_value();
  const std::string path = PathOf(key);
  auto miss = [&]() -> std::optional<std::vector<DecodedColumn>> {
    if (!just_stored) ++misses_;
    return std::nullopt;
  };
  auto corrupt = [&]() {
    if (!just_stored) ++corrupt_;
    return miss();  // damaged: decode again (and the store after it replaces the entry)
  };
  // Only a regular file: opening a FIFO put in its place would wait for a writer.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return miss();
  if (!S_ISREG(st.st_mode)) return corrupt();
  auto maybe_file = arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
  if (!maybe_file.ok()) return miss();
  auto file = *maybe_file;
  ARROW_ASSIGN_OR_RAISE(int64_t file_size, file->GetSize());
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> mapped, file->ReadAt(0, file_size));
  // Watched before any byte is read: a page the file loses meanwhile (truncated
  // in place, a read error beneath it) reads as zeros and sets `damage`, where
  // it ended the process with SIGBUS.
  DamageFlag damage;
  const std::shared_ptr<arrow::Buffer> all = WatchMapped(std::move(mapped), &damage);
  auto damaged = [&] { return damage && damage->load(); };
  const uint8_t* p = all->data();
  const auto size = static_cast<uint64_t>(all->size());
  uint64_t pos = 0;
  auto take = [&](void* out, uint64_t n) {
    if (n > size - pos) return false;
    std::memcpy(out, p + pos, n);
    pos += n;
    return true;
  };
  // 1. The header, each length bounded by the bytes that are left.
  char magic[8];
  uint64_t key_len = 0, columns = 0;
  if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !take(&key_len, 8) ||
      key_len > size - pos ||
      std::string_view(reinterpret_cast<const char*>(p + pos), key_len) != key) {
    return miss();  // another format, another key (a hash collision), or truncated
  }
  pos += key_len;
  if (!take(&columns, 8) || columns > (size - pos) / sizeof(Record)) return corrupt();
  std::vector<Record> records(columns);
  for (auto& r : records) take(&r, sizeof(r));
  // 2. Its digest, before any field of a record is used.
  const uint64_t header_end = pos;
  uint64_t header_digest = 0, data_digest = 0;
  if (!take(&header_digest, 8) || !take(&data_digest, 8)) return corrupt();
  if (Hash64(p, header_end) != header_digest) return corrupt();
  // 3. Every record inside the file (checked again: a digest is no proof).
  for (const Record& r : records) {
    if (!ValidRecord(r, size)) return corrupt();
  }
  // 4. The buffers' digest, the first time this process loads this entry,
  // unless the entry's stamp says this very file was checked by another
  // process (verified_stamp.h); a check leaves the stamp.  An entry this
  // process wrote carries the digest of its own buffers (Store): it counts as
  // checked in this process (not for others: it gets no stamp).  A file with
  // another digest in its place (a racing writer, damage to the header) is
  // checked.
  // (By the file's identity too: written in place since, it is checked again.)
  const std::string verified_id =
      key + '|' + std::to_string(data_digest) + '|' + StatIdentityOf(file->file_descriptor());
  bool verified = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    verified = verified_.count(verified_id) > 0;
  }
  if (!verified) {
    const std::string stamp = LockPathOf(key);
    if (!StampMatches(stamp, file->file_descriptor(), data_digest)) {
      auto at = [&](size_t k, Part part) { return p + OffsetOf(records[k], part); };
      ++digests_checked_;
      if (DataDigest(records, at) != data_digest || damaged()) return corrupt();
      if (!read_only_) WriteStamp(stamp, file->file_descriptor(), data_digest);
    }
    std::lock_guard<std::mutex> lock(mu_);
    verified_.insert(verified_id);
  }
  std::vector<DecodedColumn> out(columns);
  for (size_t k = 0; k < out.size(); ++k) {
    auto& c = out[k];
    const Record& r = records[k];
    c.dtype = static_cast<DType>(r.dtype);
    c.from_strings = r.from_strings != 0;
    c.count = r.count;
    c.list_size = r.list_size;
    c.owned = arrow::SliceBuffer(all, r.values_offset, r.values_bytes);  // read-only map
    c.values = c.owned->data();
    if (r.rows > 0) {
      const auto rows = static_cast<size_t>(r.rows);
      c.list_starts.resize(rows);
      c.list_lengths.resize(rows);
      std::memcpy(c.list_starts.data(), p + r.starts_offset, rows * 8);
      std::memcpy(c.list_lengths.data(), p + r.lengths_offset, rows * 8);
      for (size_t i = 0; i < rows; ++i) {
        const int64_t start = c.list_starts[i], length = c.list_lengths[i];
        if (start < 0 || length < 0 || start > c.count || length > c.count - start) {
          return corrupt();
        }
      }
    }
    if (r.nulls_bytes > 0) {
      c.nulls.assign(p + r.nulls_offset, p + r.nulls_offset + r.nulls_bytes);
    }
  }
  if (damaged()) return corrupt();  // read as zeros: not what the file held
  if (!just_stored) ++hits_;
  return std::optional<std::vector<DecodedColumn>>(std::move(out));
}

namespace {

// Writes an entry by the temp-file protocol (storage/temp_file.h); `*replaced`:
// the bytes of the file it renamed over (a damaged entry), 0 for none.
arrow::Status WriteEntry(const std::string& dir, const std::string& path, const std::string& header,
                         const std::vector<DecodedColumn>& columns,
                         const std::vector<Record>& records, int64_t rows, int64_t total,
                         int64_t* replaced) {
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
    // An empty buffer (a row group no row of which passed a filter) writes
    // nothing: it must not count as reaching its offset, or the file would
    // end before the offsets it records and never load.
    if (bytes > 0) end = std::max(end, at + bytes);
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
  struct stat old;
  const int64_t old_bytes =
      ::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) ? old.st_size : 0;
  ARROW_RETURN_NOT_OK(temp.Commit(path));
  *replaced = old_bytes;
  return arrow::Status::OK();
}

}  // namespace

std::optional<uint64_t> DecodedTier::Impl::Store(const std::string& key,
                                                 const std::vector<DecodedColumn>& columns,
                                                 int64_t rows, std::string* why,
                                                 const std::function<void()>& make_room) {
  if (read_only_) {
    ++skipped_;
    if (why) *why = "the folder '" + dir_ + "' is read-only for this process";
    return std::nullopt;
  }
  // Header first, then buffers at aligned offsets computed up front.
  std::string header(kMagic, 8);
  const uint64_t key_len = key.size(), n = columns.size();
  Append(&header, &key_len, 8);
  header += key;
  Append(&header, &n, 8);
  int64_t offset = Align(static_cast<int64_t>(header.size() + n * sizeof(Record) + 16));
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
  // Reserve the space first, so that threads and processes storing at once
  // never overshoot.
  int64_t used = 0;
  bool made_room = false;
  while (!usage_->Reserve(total, limit_, &used)) {
    if (make_room && !made_room) {
      made_room = true;
      make_room();  // (or waits for another thread's)
      continue;
    }
    ++skipped_;
    if (why) {
      *why = "its cache_limit_bytes (" + std::to_string(limit_) + " bytes, " +
             std::to_string(used) + " in use) cannot take this row group's " +
             std::to_string(total) + " bytes";
    }
    return std::nullopt;
  }
  for (const auto& r : records) Append(&header, &r, sizeof(r));
  // The header's digest, checked by every load before a field is used; the
  // buffers' digest, checked the first time a process loads the entry.
  const uint64_t header_digest = Hash64(header.data(), header.size());
  const uint64_t data_digest = DataDigest(records, [&](size_t k, Part part) {
    const auto& c = columns[k];
    return part == Part::kValues    ? c.values
           : part == Part::kStarts  ? reinterpret_cast<const uint8_t*>(c.list_starts.data())
           : part == Part::kLengths ? reinterpret_cast<const uint8_t*>(c.list_lengths.data())
                                    : c.nulls.data();
  });
  Append(&header, &header_digest, 8);
  Append(&header, &data_digest, 8);
  const std::string path = PathOf(key);
  int64_t replaced = 0;
  auto status = WriteEntry(dir_, path, header, columns, records, rows, total, &replaced);
  usage_->Release(replaced);  // counted when it was stored
  if (!status.ok()) {
    usage_->Release(total);
    ++skipped_;
    if (why) *why = "writing it failed: " + status.message();
    if (!warned_.exchange(true)) {
      std::cerr << "shardfeed: cannot write the decoded cache in '" << dir_
                << "': " << status.message()
                << "; the row groups it cannot store are decoded each time (said once)\n";
    }
    return std::nullopt;
  }
  stored_ += total;
  // Digested from this process's own buffers: a later load of a file with
  // this key and digest is not hashed again here (see Load, step 4).
  {
    std::lock_guard<std::mutex> lock(mu_);
    verified_.insert(key + '|' + std::to_string(data_digest) + '|' + StatIdentityAt(path));
  }
  return data_digest;
}

void SealDecodedTierEntryForTesting(std::string* entry) {
  auto* p = reinterpret_cast<uint8_t*>(entry->data());
  const uint64_t size = entry->size();
  uint64_t key_len = 0, columns = 0;
  if (size < 24) return;  // magic, key length, column count
  std::memcpy(&key_len, p + 8, 8);
  if (key_len > size - 24) return;
  uint64_t pos = 16 + key_len;
  std::memcpy(&columns, p + pos, 8);
  pos += 8;
  if (columns > (size - pos) / sizeof(Record)) return;
  std::vector<Record> records(columns);
  for (auto& r : records) {
    std::memcpy(&r, p + pos, sizeof(r));
    pos += sizeof(r);
  }
  if (size - pos < 16) return;
  const uint64_t header_digest = Hash64(p, pos);
  std::memcpy(p + pos, &header_digest, 8);
  for (const auto& r : records) {
    if (!ValidRecord(r, size)) return;
  }
  const uint64_t data_digest =
      DataDigest(records, [&](size_t k, Part part) { return p + OffsetOf(records[k], part); });
  std::memcpy(p + pos + 8, &data_digest, 8);
}

namespace {

// The key an entry file records (its header), or nullopt for anything that
// is not a readable entry.  Opened without blocking: a FIFO is no entry.
std::optional<std::string> ReadEntryKey(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  char head[16];
  std::optional<std::string> key;
  uint64_t key_len = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::pread(fd, head, 16, 0) == 16 &&
      std::memcmp(head, kMagic, 8) == 0) {
    std::memcpy(&key_len, head + 8, 8);
    if (key_len <= (uint64_t{1} << 20) && key_len <= static_cast<uint64_t>(st.st_size) - 16) {
      std::string text(key_len, '\0');
      if (::pread(fd, text.data(), key_len, 16) == static_cast<ssize_t>(key_len)) {
        key = std::move(text);
      }
    }
  }
  ::close(fd);
  return key;
}

}  // namespace

int64_t DecodedTier::Impl::PruneSuperseded(const Catalog& catalog) {
  if (read_only_) return 0;  // nothing there is ours to remove
  const SupersededKeys superseded(catalog);
  // One at a time: a thread that finds the tier full while another prunes
  // waits for it, and then finds the room it made.
  std::lock_guard<std::mutex> prune_lock(prune_mu_);
  if (!pruned_.insert(Hash64(superseded.versions())).second) return 0;
  int64_t freed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsEntryOrTemp(name) || IsTemp(name)) continue;
    const std::string path = entry.path().string();
    const auto key = ReadEntryKey(path);
    if (!key || !superseded(*key)) continue;
    // Under the entry's lock, as Clear removes: one a loader holds stays.  No
    // lock file (kMissing): no one holds it.
    const std::string lock_path = LockPathOf(*key);
    auto locked =
        storage_internal::OpenLocked(lock_path, O_RDWR, storage_internal::LockMode::kExclusive,
                                     storage_internal::LockWait::kNoWait);
    if (!locked.ok() || locked->outcome == storage_internal::LockOutcome::kBusy) continue;
    const bool have_lock = locked->outcome == storage_internal::LockOutcome::kLocked;
    std::error_code file_ec;
    const auto size = std::filesystem::file_size(path, file_ec);
    if (file_ec || !std::filesystem::remove(path, file_ec) || file_ec) continue;
    freed += static_cast<int64_t>(size);
    if (have_lock) std::filesystem::remove(lock_path, file_ec);
  }
  usage_->Release(freed);
  return freed;
}

void DecodedTier::Impl::RemoveDamaged(const std::string& path, int64_t bytes) {
  if (!read_only_ && ::unlink(path.c_str()) == 0) usage_->Release(bytes);
}

DecodedTierStats DecodedTier::Impl::stats() const {
  return {hits_.load(),    misses_.load(), stored_.load(),
          skipped_.load(), usage_->Seen(), corrupt_.load()};
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

bool DecodedTier::read_only() const { return impl_->read_only_; }

arrow::Result<int64_t> DecodedTier::Clear() {
  if (impl_->read_only_) {
    return Error(ErrorKind::kStorage, "cannot clear decoded cache folder '" + impl_->dir_ +
                                          "': it is read-only for this process");
  }
  int64_t freed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(impl_->dir_, ec)) {
    std::error_code file_ec;
    const std::string name = entry.path().filename().string();
    if ((IsLock(name) || IsEntryOrTemp(name)) &&
        storage_internal::RemoveIfNotRegular(entry.path().string())) {
      continue;  // not a file: damage, whatever it held
    }
    if (IsLock(name)) {
      // Removed under its lock (lockers check that the path still names the
      // inode they locked); one held by a loader now stays.
      auto locked = storage_internal::OpenLocked(entry.path().string(), O_RDWR,
                                                 storage_internal::LockMode::kExclusive,
                                                 storage_internal::LockWait::kNoWait);
      if (locked.ok() && locked->outcome == storage_internal::LockOutcome::kLocked) {
        std::filesystem::remove(entry.path(), file_ec);
      }
      continue;
    }
    if (!IsEntryOrTemp(name) || IsTemp(name) || !entry.is_regular_file(file_ec)) continue;
    const auto size = entry.file_size(file_ec);
    if (file_ec || !std::filesystem::remove(entry.path(), file_ec) || file_ec) continue;
    freed += static_cast<int64_t>(size);
  }
  if (ec) {
    return Error(ErrorKind::kStorage,
                 "cannot list decoded cache folder '" + impl_->dir_ + "': " + ec.message());
  }
  // The folder's account, shared with the other processes using it.
  impl_->usage_->Release(freed);
  // An entry stored again later (by any process) must be checked again.
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->verified_.clear();
  return freed;
}

}  // namespace shardfeed
