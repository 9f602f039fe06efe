#include "catalog/deletion_vector.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <arrow/buffer.h>
#include <arrow/io/interfaces.h>
#include <arrow/util/crc32.h>

#include "shardfeed/status.h"
#include "util/deadline_file.h"

namespace shardfeed {
namespace {

constexpr uint32_t kPortableMagic = 1681511377;  // little-endian, 64-bit portable buckets
constexpr uint32_t kNativeMagic = 1681511376;    // big-endian, size-prefixed 32-bit bitmaps
constexpr uint32_t kCookie = 12346;              // RoaringFormatSpec: no run containers
constexpr uint32_t kRunCookie = 12347;           // some run containers
constexpr size_t kArrayMax = 4096;               // a container above this is a bitmap
constexpr int64_t kWholeFile = 64 << 20;         // a DV file up to this size is read at once

uint32_t Swap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
}

arrow::Status Bad(const std::string& why) {
  return Error(ErrorKind::kInvalidData, "a damaged deletion vector: " + why);
}

// Reads a serialized bitmap front to back; every read checks the bytes left.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }
  arrow::Result<std::string_view> Take(size_t n) {
    if (left() < n) {
      return Bad("it ends at byte " + std::to_string(bytes_.size()) + ", " + std::to_string(n) +
                 " more needed at byte " + std::to_string(pos_));
    }
    const auto out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  template <typename T>
  arrow::Result<T> Little() {
    ARROW_ASSIGN_OR_RAISE(const auto raw, Take(sizeof(T)));
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<T>(static_cast<T>(static_cast<uint8_t>(raw[i])) << (8 * i));
    }
    return v;
  }
  arrow::Result<uint32_t> Big32() {
    ARROW_ASSIGN_OR_RAISE(const uint32_t v, Little<uint32_t>());
    return Swap32(v);
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Appends [begin, end) to sorted runs, merging an adjacent one.
class RunBuilder {
 public:
  arrow::Status Add(int64_t begin, int64_t end) {
    if (!runs_.empty() && begin < runs_.back().end) {
      return Bad("its row indices are not in ascending order (" + std::to_string(begin) +
                 " after " + std::to_string(runs_.back().end - 1) + ")");
    }
    if (!runs_.empty() && begin == runs_.back().end) {
      runs_.back().end = end;
    } else {
      runs_.push_back({begin, end});
    }
    return arrow::Status::OK();
  }
  std::vector<RowRun> Take() { return std::move(runs_); }

 private:
  std::vector<RowRun> runs_;
};

// One 32-bit Roaring bitmap (RoaringFormatSpec) whose values get `high` as
// their upper 32 bits.
arrow::Status ParseRoaring32(Cursor* in, int64_t high, RunBuilder* out) {
  ARROW_ASSIGN_OR_RAISE(const uint32_t cookie, in->Little<uint32_t>());
  const bool has_runs = (cookie & 0xFFFF) == kRunCookie;
  size_t n = 0;
  std::string_view run_flags;
  if (has_runs) {
    n = (cookie >> 16) + 1;
    ARROW_ASSIGN_OR_RAISE(run_flags, in->Take((n + 7) / 8));
  } else if (cookie == kCookie) {
    ARROW_ASSIGN_OR_RAISE(const uint32_t count, in->Little<uint32_t>());
    if (count > 65536) return Bad(std::to_string(count) + " containers (at most 65536)");
    n = count;
  } else {
    return Bad("no Roaring bitmap at byte " + std::to_string(in->pos() - 4) + " (cookie " +
               std::to_string(cookie) + ")");
  }
  ARROW_ASSIGN_OR_RAISE(const auto header, in->Take(4 * n));
  // Offsets follow when there are no runs or 4 containers or more: the
  // containers are read in order, so they are skipped (not trusted).
  if (!has_runs || n >= 4) ARROW_RETURN_NOT_OK(in->Take(4 * n).status());
  Cursor keys(header);
  int64_t previous_key = -1;
  for (size_t c = 0; c < n; ++c) {
    ARROW_ASSIGN_OR_RAISE(const uint16_t key, keys.Little<uint16_t>());
    ARROW_ASSIGN_OR_RAISE(const uint16_t card_minus_one, keys.Little<uint16_t>());
    if (key <= previous_key) return Bad("its container keys are not ascending");
    previous_key = key;
    const size_t card = size_t{card_minus_one} + 1;
    const int64_t base = (high << 32) | (int64_t{key} << 16);
    const bool is_run = has_runs && (static_cast<uint8_t>(run_flags[c / 8]) >> (c % 8) & 1);
    size_t seen = 0;
    if (is_run) {
      ARROW_ASSIGN_OR_RAISE(const uint16_t num_runs, in->Little<uint16_t>());
      for (uint16_t r = 0; r < num_runs; ++r) {
        ARROW_ASSIGN_OR_RAISE(const uint16_t start, in->Little<uint16_t>());
        ARROW_ASSIGN_OR_RAISE(const uint16_t length_minus_one, in->Little<uint16_t>());
        if (size_t{start} + length_minus_one > 0xFFFF) return Bad("a run past its container");
        ARROW_RETURN_NOT_OK(out->Add(base + start, base + start + length_minus_one + 1));
        seen += size_t{length_minus_one} + 1;
      }
    } else if (card <= kArrayMax) {
      int64_t begin = -1, end = -1;
      for (size_t v = 0; v < card; ++v) {
        ARROW_ASSIGN_OR_RAISE(const uint16_t low, in->Little<uint16_t>());
        if (low == end) {
          ++end;
          continue;
        }
        if (begin >= 0) ARROW_RETURN_NOT_OK(out->Add(base + begin, base + end));
        begin = low;
        end = int64_t{low} + 1;
      }
      if (begin >= 0) ARROW_RETURN_NOT_OK(out->Add(base + begin, base + end));
      seen = card;
    } else {
      int64_t begin = -1;
      for (int64_t w = 0; w < 1024; ++w) {
        ARROW_ASSIGN_OR_RAISE(const uint64_t word, in->Little<uint64_t>());
        seen += static_cast<size_t>(std::popcount(word));
        // Run edges a word at a time: the next set bit outside a run, the next
        // clear bit inside one (none left in the word: the state carries on).
        int b = 0;
        while (b < 64) {
          const uint64_t rest = (begin < 0 ? word : ~word) >> b;
          if (rest == 0) break;
          b += std::countr_zero(rest);
          if (begin < 0) {
            begin = w * 64 + b;
          } else {
            ARROW_RETURN_NOT_OK(out->Add(base + begin, base + w * 64 + b));
            begin = -1;
          }
        }
      }
      if (begin >= 0) ARROW_RETURN_NOT_OK(out->Add(base + begin, base + 65536));
    }
    if (seen != card) {
      return Bad("a container holds " + std::to_string(seen) + " values, its header says " +
                 std::to_string(card));
    }
  }
  return arrow::Status::OK();
}

arrow::Status CheckHigh(int64_t key, int64_t previous) {
  if (key <= previous) return Bad("its 32-bit buckets are not in ascending order");
  if (key > std::numeric_limits<int32_t>::max()) {
    return Bad("a row index above 2^63 (bucket " + std::to_string(key) + ")");
  }
  return arrow::Status::OK();
}

std::string Uuid(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto b = static_cast<uint8_t>(bytes[i]);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace

std::string DeletionVectorDescriptor::UniqueId() const {
  std::string id = storage_type + path_or_inline;
  if (offset) {
    id += '@';
    id += std::to_string(*offset);
  }
  return id;
}

arrow::Result<std::string> Z85Decode(std::string_view text) {
  static constexpr std::string_view kAlphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  if (text.size() % 5 != 0) {
    return Bad("Z85 text of " + std::to_string(text.size()) +
               " characters (a multiple of 5 is needed)");
  }
  std::string out;
  out.reserve(text.size() / 5 * 4);
  for (size_t i = 0; i < text.size(); i += 5) {
    uint64_t v = 0;
    for (size_t j = i; j < i + 5; ++j) {
      const size_t digit = kAlphabet.find(text[j]);
      if (digit == std::string_view::npos) {
        return Bad("Z85 text with the character '" + std::string(1, text[j]) + "' at " +
                   std::to_string(j));
      }
      v = v * 85 + digit;
    }
    if (v > std::numeric_limits<uint32_t>::max()) {
      return Bad("Z85 text whose group at " + std::to_string(i) + " is above 2^32 - 1");
    }
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xFF);
  }
  return out;
}

arrow::Result<std::vector<RowRun>> ParseDeletionVector(std::string_view bytes) {
  Cursor in(bytes);
  ARROW_ASSIGN_OR_RAISE(const uint32_t magic, in.Little<uint32_t>());
  RunBuilder runs;
  if (magic == kPortableMagic) {
    ARROW_ASSIGN_OR_RAISE(const uint64_t buckets, in.Little<uint64_t>());
    // Each bucket takes at least 12 bytes: a count the bytes cannot hold is damage.
    if (buckets > in.left() / 12) {
      return Bad(std::to_string(buckets) + " buckets in " + std::to_string(in.left()) + " bytes");
    }
    int64_t previous = -1;
    for (uint64_t b = 0; b < buckets; ++b) {
      ARROW_ASSIGN_OR_RAISE(const uint32_t key, in.Little<uint32_t>());
      ARROW_RETURN_NOT_OK(CheckHigh(key, previous));
      previous = key;
      ARROW_RETURN_NOT_OK(ParseRoaring32(&in, key, &runs));
    }
  } else if (Swap32(magic) == kNativeMagic) {
    ARROW_ASSIGN_OR_RAISE(const uint32_t bitmaps, in.Big32());
    if (bitmaps > in.left() / 4) {
      return Bad(std::to_string(bitmaps) + " bitmaps in " + std::to_string(in.left()) + " bytes");
    }
    for (uint32_t b = 0; b < bitmaps; ++b) {
      ARROW_RETURN_NOT_OK(CheckHigh(b, int64_t{b} - 1));
      ARROW_ASSIGN_OR_RAISE(const uint32_t size, in.Big32());
      ARROW_ASSIGN_OR_RAISE(const auto body, in.Take(size));
      Cursor one(body);
      ARROW_RETURN_NOT_OK(ParseRoaring32(&one, b, &runs));
      if (one.left() != 0) return Bad("bitmap " + std::to_string(b) + " has trailing bytes");
    }
  } else {
    return Bad("its magic number is " + std::to_string(magic) + ", not " +
               std::to_string(kPortableMagic) + " (a RoaringBitmapArray)");
  }
  if (in.left() != 0) {
    return Bad(std::to_string(in.left()) + " bytes after its last bitmap");
  }
  return runs.Take();
}

std::vector<RowRun> LiveRuns(const DeletedRows* deleted, int64_t begin, int64_t end) {
  std::vector<RowRun> live;
  if (deleted) {
    const auto& runs = deleted->runs;
    auto run = std::lower_bound(runs.begin(), runs.end(), begin,
                                [](const RowRun& r, int64_t row) { return r.end <= row; });
    for (; run != runs.end() && run->begin < end; ++run) {
      if (run->begin > begin) live.push_back({begin, run->begin});
      begin = run->end;
    }
  }
  if (begin < end) live.push_back({begin, end});
  return live;
}

arrow::Result<std::string> DeletionVectorFile(const arrow::fs::FileSystem& fs,
                                              const std::string& root,
                                              const DeletionVectorDescriptor& dv) {
  if (dv.storage_type == "p") {
    const std::string& uri = dv.path_or_inline;
    if (fs.type_name() == "local" && !uri.empty() && uri.front() == '/') return uri;
    auto path = fs.PathFromUri(uri);
    if (!path.ok()) {
      return Error(ErrorKind::kInvalidData,
                   "its deletion vector's file '" + uri +
                       "' is not on the table's filesystem: " + path.status().message());
    }
    return path;
  }
  if (dv.storage_type != "u") {
    return Bad("its storage type is '" + dv.storage_type + "' (known: 'u', 'i' and 'p')");
  }
  const std::string& text = dv.path_or_inline;
  if (text.size() < 20) {
    return Bad("a relative path '" + text + "' shorter than its 20-character UUID");
  }
  const std::string prefix = text.substr(0, text.size() - 20);
  ARROW_ASSIGN_OR_RAISE(const std::string uuid, Z85Decode(text.substr(text.size() - 20)));
  // The random prefix is one folder of the table (never "..", never absolute).
  if (prefix.find('/') != std::string::npos || prefix == "." || prefix == "..") {
    return Bad("a relative path whose prefix '" + prefix + "' is not a folder name");
  }
  return root + "/" + (prefix.empty() ? "" : prefix + "/") + "deletion_vector_" + Uuid(uuid) +
         ".bin";
}

arrow::Result<std::string> DeletionVectorReader::Stored(const DeletionVectorDescriptor& dv) {
  if (dv.size_in_bytes < 4 || dv.size_in_bytes > std::numeric_limits<int32_t>::max()) {
    return Bad("its sizeInBytes is " + std::to_string(dv.size_in_bytes));
  }
  if (dv.cardinality < 0) return Bad("it has no cardinality");
  const auto size = static_cast<size_t>(dv.size_in_bytes);
  if (dv.storage_type == "i") {
    ARROW_ASSIGN_OR_RAISE(std::string bytes, Z85Decode(dv.path_or_inline));
    // Z85 pads to whole 4-byte groups.
    if (bytes.size() < size || bytes.size() - size >= 4) {
      return Bad("its inline text holds " + std::to_string(bytes.size()) +
                 " bytes, its sizeInBytes is " + std::to_string(size));
    }
    bytes.resize(size);
    return bytes;
  }
  ARROW_ASSIGN_OR_RAISE(const std::string path, DeletionVectorFile(fs_, root_, dv));
  const auto shown = [&](const arrow::Status& status) {
    return WithContext(status, "its deletion vector's file '" + path + "'");
  };
  auto& [file, whole, file_bytes] = open_[path];
  if (!file) {
    auto opened = fs_.OpenInputFile(path);
    if (!opened.ok()) {
      const auto info = fs_.GetFileInfo(path);
      if (info.ok() && info->type() == arrow::fs::FileType::NotFound) {
        return shown(Error(ErrorKind::kNotFound,
                           "it does not exist (removed by a VACUUM, or a partial copy?)"));
      }
      return shown(opened.status());
    }
    file = fs_.type_name() == "local" ? *opened : WithDeadline(*opened, remote_timeout_);
    // A file of one DELETE holds the vectors of many data files: read once
    // when small (one request, not one per vector), else range by range.
    auto file_size = file->GetSize();
    if (!file_size.ok()) return shown(file_size.status());
    file_bytes = *file_size;
    const bool small = file_bytes <= kWholeFile;
    auto head = file->ReadAt(0, small ? file_bytes : 1);
    if (!head.ok()) {
      file.reset();
      return shown(head.status());
    }
    if ((*head)->size() < 1 || (*head)->data()[0] != 1) {
      file.reset();
      return shown(Bad("not a deletion vector file of format version 1"));
    }
    if (small) whole = std::move(*head);
  }
  const int64_t offset = dv.offset.value_or(1);
  if (offset < 1 || offset >= file_bytes) {
    return shown(Bad("its offset is " + std::to_string(offset) + " in a file of " +
                     std::to_string(file_bytes) + " bytes"));
  }
  std::shared_ptr<arrow::Buffer> read;
  if (whole) {
    read = arrow::SliceBuffer(
        whole, std::min(offset, whole->size()),
        std::min(dv.size_in_bytes + 8, whole->size() - std::min(offset, whole->size())));
  } else {
    auto range = file->ReadAt(offset, dv.size_in_bytes + 8);
    if (!range.ok()) return shown(range.status());
    read = std::move(*range);
  }
  const std::string_view stored(read->data_as<char>(), static_cast<size_t>(read->size()));
  Cursor in(stored);
  auto framed = [&]() -> arrow::Result<std::string> {
    ARROW_ASSIGN_OR_RAISE(const uint32_t stored_size, in.Big32());
    if (stored_size != size) {
      return Bad("the file says " + std::to_string(stored_size) + " bytes at offset " +
                 std::to_string(offset) + ", the log " + std::to_string(size));
    }
    ARROW_ASSIGN_OR_RAISE(const auto body, in.Take(size));
    ARROW_ASSIGN_OR_RAISE(const uint32_t crc, in.Big32());
    if (arrow::internal::crc32(0, body.data(), body.size()) != crc) {
      return Bad("its CRC-32 does not match its bytes at offset " + std::to_string(offset));
    }
    return std::string(body);
  };
  auto bytes = framed();
  if (!bytes.ok()) return shown(bytes.status());
  return bytes;
}

arrow::Result<std::shared_ptr<const DeletedRows>> DeletionVectorReader::Read(
    const DeletionVectorDescriptor& dv) {
  ARROW_ASSIGN_OR_RAISE(const std::string bytes, Stored(dv));
  auto rows = std::make_shared<DeletedRows>();
  rows->id = dv.UniqueId();
  ARROW_ASSIGN_OR_RAISE(rows->runs, ParseDeletionVector(bytes));
  for (const auto& run : rows->runs) rows->count += run.end - run.begin;
  if (rows->count != dv.cardinality) {
    return Bad("it holds " + std::to_string(rows->count) + " rows, its cardinality is " +
               std::to_string(dv.cardinality));
  }
  return std::shared_ptr<const DeletedRows>(std::move(rows));
}

}  // namespace shardfeed
