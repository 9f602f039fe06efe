#include "transform/vocabulary.h"

#include <bit>
#include <limits>
#include <string>
#include <utility>

#include <arrow/array.h>
#include <arrow/buffer.h>

#include "shardfeed/status.h"
#include "shardfeed/vocabulary.h"
#include "util/hash.h"
#include "util/memory.h"
#include "util/string_array.h"

namespace shardfeed {

arrow::Result<std::shared_ptr<const VocabularyTable>> VocabularyTable::Make(
    std::vector<std::string> values) {
  if (values.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    return Error(ErrorKind::kInvalidArgument,
                 "Vocabulary: too many values (" + std::to_string(values.size()) + ")");
  }
  std::shared_ptr<VocabularyTable> table(new VocabularyTable());
  // At most half full: probes stay short even for unlucky hashes.
  const size_t capacity = std::bit_ceil(std::max<size_t>(2 * values.size(), 8));
  table->slots_.assign(capacity, -1);
  table->hashes_.reserve(values.size());
  StreamingHash digest;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& value = values[i];
    const uint64_t hash = StringHash64(value);
    size_t slot = hash & (capacity - 1);
    for (; table->slots_[slot] >= 0; slot = (slot + 1) & (capacity - 1)) {
      const auto other = static_cast<size_t>(table->slots_[slot]);
      if (table->hashes_[other] == hash && values[other] == value) {
        return Error(ErrorKind::kInvalidArgument,
                     "Vocabulary: value '" + value + "' is listed twice (positions " +
                         std::to_string(other) + " and " + std::to_string(i) + ")");
      }
    }
    table->slots_[slot] = static_cast<int32_t>(i);
    table->hashes_.push_back(hash);
    // Length-prefixed, so ["ab", "c"] and ["a", "bc"] differ.
    const uint64_t size = value.size();
    digest.Update(&size, sizeof(size));
    digest.Update(value.data(), value.size());
  }
  table->values_ = std::move(values);
  table->digest_ = Hex64(digest.Digest());
  return std::shared_ptr<const VocabularyTable>(std::move(table));
}

int64_t VocabularyTable::Find(std::string_view value, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask; slots_[slot] >= 0; slot = (slot + 1) & mask) {
    const auto i = static_cast<size_t>(slots_[slot]);
    if (hashes_[i] == hash && values_[i] == value) return static_cast<int64_t>(i) + 1;
  }
  return 0;
}

int64_t VocabularyTable::Find(std::string_view value) const {
  return Find(value, StringHash64(value));
}

arrow::Status ApplyVocabulary(const TransformSpec& t, DecodedColumn* c) {
  if (!t.vocabulary) return Error(ErrorKind::kInvalidArgument, "Vocabulary has no values");
  if (!c->from_strings || !c->array) {
    return Error(ErrorKind::kUnsupportedType, "Vocabulary needs a string column");
  }
  const auto& table = *t.vocabulary;
  const int64_t oov = t.n;
  const auto& array = *c->array;
  const int64_t n = c->count;
  if (array.length() != n) {
    return Error(ErrorKind::kInvalidData, "Vocabulary: " + std::to_string(array.length()) +
                                              " strings for " + std::to_string(n) + " values");
  }
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> out,
                        arrow::AllocateBuffer(std::max<int64_t>(n * 8, 1), EnginePool()));
  auto* ids = reinterpret_cast<int64_t*>(out->mutable_data());
  auto index_of = [&](int64_t found) { return found > 0 ? found : oov; };
  // Null elements, and the elements of a null fixed-size list (marked in nulls).
  auto null_at = [&](int64_t i) {
    return array.IsNull(i) || (c->has_nulls() && c->nulls[static_cast<size_t>(i)] != 0);
  };
  if (IsStringDictionary(array)) {
    // Each distinct value once, then one array lookup per row.
    const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
    const auto& values = *dict.dictionary();
    std::vector<int64_t> mapped(static_cast<size_t>(values.length()), oov);
    for (int64_t k = 0; k < values.length(); ++k) {
      if (values.IsValid(k))
        mapped[static_cast<size_t>(k)] = index_of(table.Find(StringAt(values, k)));
    }
    bool bad = false;
    ForEachDictionaryIndex(dict, [&](int64_t i, int64_t k) {
      if (null_at(i)) {
        ids[i] = oov;
      } else if (k < 0 || k >= values.length()) {
        bad = true;
      } else {
        ids[i] = mapped[static_cast<size_t>(k)];
      }
    });
    if (bad) return Error(ErrorKind::kInvalidData, "dictionary index out of range");
  } else {
    // The hashes Flatten made serve as the probes.
    const auto* hashes = reinterpret_cast<const uint64_t*>(c->values);
    for (int64_t i = 0; i < n; ++i) {
      ids[i] = null_at(i) ? oov : index_of(table.Find(StringAt(array, i), hashes[i]));
    }
  }
  c->owned = std::move(out);
  c->values = c->owned->data();
  c->dtype = DType::kInt64;
  c->from_strings = false;
  c->nulls.clear();  // a null is the oov index, never an error
  c->array.reset();  // the strings are no longer needed: free them with the row group's read
  return arrow::Status::OK();
}

}  // namespace shardfeed
