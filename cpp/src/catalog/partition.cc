#include "catalog/partition.h"

#include <charconv>

#include <arrow/scalar.h>
#include <arrow/type.h>

#include "shardfeed/status.h"
#include "util/string_array.h"

namespace shardfeed {

namespace {

constexpr char kDefaultPartition[] = "__HIVE_DEFAULT_PARTITION__";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<int64_t> ParseInt64(const std::string& text) {
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
  if (begin != text.data() && begin != end && *begin == '-') return std::nullopt;  // "+-5"
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) return std::nullopt;
  return value;
}

std::string Keys(const PartitionPairs& pairs) {
  std::string out;
  for (const auto& [key, value] : pairs) out += (out.empty() ? "" : "/") + key;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string UrlDecode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

PartitionPairs ParseHivePath(const std::string& rel_path) {
  PartitionPairs pairs;
  size_t start = 0;
  while (true) {
    const size_t slash = rel_path.find('/', start);
    if (slash == std::string::npos) break;  // the last component is the file name
    const std::string part = rel_path.substr(start, slash - start);
    start = slash + 1;
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // not a key=value folder
    const std::string value = part.substr(eq + 1);
    std::optional<std::string> decoded;
    if (value != kDefaultPartition) decoded = UrlDecode(value);
    pairs.emplace_back(UrlDecode(part.substr(0, eq)), std::move(decoded));
  }
  return pairs;
}

arrow::Result<PartitionTable> InferPartitions(const std::vector<std::string>& rel_paths,
                                              const std::vector<bool>& empty_is_null) {
  std::vector<PartitionPairs> parsed;
  parsed.reserve(rel_paths.size());
  for (size_t i = 0; i < rel_paths.size(); ++i) {
    parsed.push_back(ParseHivePath(rel_paths[i]));
    if (i < empty_is_null.size() && empty_is_null[i]) {
      for (auto& pair : parsed.back()) {
        if (pair.second && pair.second->empty()) pair.second.reset();
      }
    }
  }
  return InferPartitions(rel_paths, std::move(parsed));
}

arrow::Result<PartitionTable> InferPartitions(const std::vector<std::string>& rel_paths,
                                              std::vector<PartitionPairs> parsed) {
  PartitionTable table;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const auto& first = parsed.front();
    const auto& pairs = parsed[i];
    bool same = first.size() == pairs.size();
    for (size_t k = 0; same && k < pairs.size(); ++k) same = pairs[k].first == first[k].first;
    if (!same) {
      return Error(ErrorKind::kSchemaMismatch,
                   "files disagree on their Hive partition keys: file '" + rel_paths[0] + "' has " +
                       Keys(first) + ", file '" + rel_paths[i] + "' has " + Keys(pairs) +
                       " (pass partitioning=None to read the folders as they are)");
    }
  }
  const size_t num_keys = parsed.empty() ? 0 : parsed.front().size();
  std::vector<bool> integer(num_keys, true);
  // A value that is not UTF-8 text (a Latin-1 folder name, "%FF") makes its key's
  // column binary: the same bytes, hashed and looked up alike, never a string
  // column whose values are not text.
  std::vector<bool> text(num_keys, true);
  for (const auto& pairs : parsed) {
    for (size_t k = 0; k < num_keys; ++k) {
      if (pairs[k].second && !ParseInt64(*pairs[k].second)) integer[k] = false;
      if (pairs[k].second && !ValidUtf8(*pairs[k].second)) text[k] = false;
    }
  }
  arrow::FieldVector fields;
  for (size_t k = 0; k < num_keys; ++k) {
    const auto& key = parsed.front()[k].first;
    for (size_t j = 0; j < k; ++j) {
      if (parsed.front()[j].first == key) {
        return Error(ErrorKind::kSchemaMismatch, "file '" + rel_paths[0] +
                                                     "': Hive partition key '" + key +
                                                     "' appears twice in its path");
      }
    }
    fields.push_back(arrow::field(key, integer[k] ? arrow::int64()
                                       : text[k]  ? arrow::utf8()
                                                  : arrow::binary()));
  }
  table.schema = arrow::schema(fields);
  for (const auto& pairs : parsed) {
    std::vector<std::shared_ptr<arrow::Scalar>> values;
    for (size_t k = 0; k < num_keys; ++k) {
      const auto& value = pairs[k].second;
      if (!value) {
        values.push_back(arrow::MakeNullScalar(fields[k]->type()));
      } else if (integer[k]) {
        values.push_back(std::make_shared<arrow::Int64Scalar>(*ParseInt64(*value)));
      } else if (text[k]) {
        values.push_back(std::make_shared<arrow::StringScalar>(*value));
      } else {
        values.push_back(std::make_shared<arrow::BinaryScalar>(*value));
      }
    }
    table.values.push_back(std::move(values));
  }
  return table;
}

}  // namespace shardfeed
