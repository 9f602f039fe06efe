// The binary image of a FilteredRows, for the cache: validated in full on load
// (design invariant 8), since the file may be truncated, stale or damaged.
#include <bit>
#include <cstring>

#include "shardfeed/filter.h"
#include "util/hash.h"

namespace shardfeed {

namespace {

// 2: FilterCounts::rows_deleted.
constexpr char kMagic[8] = {'S', 'F', 'F', 'I', 'L', 'T', '2', '\n'};
constexpr int kNumCounts = sizeof(FilterCounts) / sizeof(int64_t);

void Put(std::string* out, int64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

struct Reader {
  const std::string& bytes;
  size_t pos = 0;
  bool Get(int64_t* v) {
    if (bytes.size() - pos < 8) return false;
    std::memcpy(v, bytes.data() + pos, 8);
    pos += 8;
    return true;
  }
  bool Take(size_t n, const char** p) {
    if (bytes.size() - pos < n) return false;
    *p = bytes.data() + pos;
    pos += n;
    return true;
  }
};

}  // namespace

std::string FilteredRows::Serialize() const {
  std::string out(kMagic, sizeof(kMagic));
  Put(&out, static_cast<int64_t>(key_.size()));
  out += key_;
  int64_t counts[kNumCounts];
  std::memcpy(counts, &counts_, sizeof(counts));
  for (int64_t v : counts) Put(&out, v);
  Put(&out, static_cast<int64_t>(pass_rows_.size()));
  for (size_t i = 0; i < pass_rows_.size(); ++i) {
    Put(&out, pass_rows_[i]);
    Put(&out, kind_[i]);
    if (kind_[i] == 1) {
      Put(&out, static_cast<int64_t>(indices_[i].size()));
      out.append(reinterpret_cast<const char*>(indices_[i].data()), indices_[i].size() * 4);
    } else if (kind_[i] == 2) {
      Put(&out, static_cast<int64_t>(bitmaps_[i].size()));
      out.append(reinterpret_cast<const char*>(bitmaps_[i].data()), bitmaps_[i].size());
    }
  }
  return out;
}

std::string FilteredRows::SelectionDigest() const {
  StreamingHash hash;
  for (size_t i = 0; i < pass_rows_.size(); ++i) {
    const int64_t counts[2] = {num_rows_[i], pass_rows_[i]};
    hash.Update(counts, sizeof(counts));
    if (pass_rows_[i] == 0 || All(static_cast<int32_t>(i))) continue;
    const auto rows = Rows(static_cast<int32_t>(i));
    hash.Update(rows.data(), rows.size() * sizeof(int64_t));
  }
  return Hex64(hash.Digest());
}

std::shared_ptr<const FilteredRows> FilteredRows::Deserialize(const Catalog& catalog,
                                                              const std::string& key,
                                                              const std::string& bytes) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return nullptr;
  }
  Reader in{bytes, sizeof(kMagic)};
  int64_t key_size = 0;
  const char* p = nullptr;
  if (!in.Get(&key_size) || key_size != static_cast<int64_t>(key.size()) ||
      !in.Take(key.size(), &p) || std::memcmp(p, key.data(), key.size()) != 0) {
    return nullptr;
  }
  auto rows = std::shared_ptr<FilteredRows>(new FilteredRows());
  rows->key_ = key;
  int64_t counts[kNumCounts];
  for (auto& v : counts) {
    if (!in.Get(&v) || v < 0) return nullptr;
  }
  std::memcpy(&rows->counts_, counts, sizeof(counts));
  const auto& groups = catalog.row_groups();
  int64_t n = 0;
  if (!in.Get(&n) || n != static_cast<int64_t>(groups.size())) return nullptr;
  rows->kind_.assign(groups.size(), 0);
  rows->indices_.resize(groups.size());
  rows->bitmaps_.resize(groups.size());
  int64_t kept = 0, total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int64_t num_rows = groups[i].num_rows;
    int64_t pass = 0, kind = 0, len = 0;
    if (!in.Get(&pass) || !in.Get(&kind) || pass < 0 || pass > num_rows) return nullptr;
    if (kind == 0) {
      if (pass != 0 && pass != num_rows) return nullptr;
    } else if (kind == 1) {
      if (!in.Get(&len) || len != pass || !in.Take(static_cast<size_t>(len) * 4, &p)) {
        return nullptr;
      }
      auto& idx = rows->indices_[i];
      idx.resize(static_cast<size_t>(len));
      std::memcpy(idx.data(), p, idx.size() * 4);
      for (size_t k = 0; k < idx.size(); ++k) {
        if (idx[k] >= num_rows || (k > 0 && idx[k] <= idx[k - 1])) return nullptr;
      }
    } else if (kind == 2) {
      if (!in.Get(&len) || len != (num_rows + 7) / 8 || !in.Take(static_cast<size_t>(len), &p)) {
        return nullptr;
      }
      auto& bits = rows->bitmaps_[i];
      bits.assign(p, p + len);
      int64_t ones = 0;
      for (uint8_t b : bits) ones += std::popcount(b);
      const int spare = static_cast<int>(len * 8 - num_rows);
      if (ones != pass || (spare > 0 && (bits.back() >> (8 - spare)) != 0)) return nullptr;
    } else {
      return nullptr;
    }
    rows->kind_[i] = static_cast<uint8_t>(kind);
    rows->pass_rows_.push_back(pass);
    rows->num_rows_.push_back(num_rows);
    kept += pass;
    total += num_rows;
  }
  if (in.pos != bytes.size() || rows->counts_.rows_kept != kept || rows->counts_.rows != total) {
    return nullptr;
  }
  return rows;
}

}  // namespace shardfeed
