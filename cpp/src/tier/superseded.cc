#include "tier/superseded.h"

#include <cctype>
#include <cstdint>

namespace shardfeed {

SupersededKeys::SupersededKeys(const Catalog& catalog) {
  const auto& files = catalog.files();
  current_.reserve(files.size());
  identity_.reserve(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string path_key = CacheKey(catalog, static_cast<int32_t>(f));
    by_path_[path_key + '|'].push_back(f);
    current_.push_back(std::string(kTierKeyTag) + '|' + path_key + '|' +
                       std::to_string(files[f].size) + '|' + files[f].version + "|rg");
    identity_.push_back(files[f].identity.empty() ? "" : "|id" + files[f].identity);
    versions_.append(current_.back()).append(identity_.back()).push_back('\n');
  }
}

bool SupersededKeys::IsCurrent(std::string_view key, size_t file) const {
  const std::string& current = current_[file];
  if (key.substr(0, current.size()) != current) return false;
  size_t end = current.size();
  while (end < key.size() && std::isdigit(static_cast<unsigned char>(key[end])) != 0) ++end;
  if (end == current.size()) return false;  // no row group number
  const std::string& id = identity_[file];
  const std::string_view after = key.substr(end);
  if (id.empty()) return after.empty() || after[0] == '|';
  return after.substr(0, id.size()) == id && (after.size() == id.size() || after[id.size()] == '|');
}

bool SupersededKeys::operator()(std::string_view key) const {
  // "v<digits>|<CacheKey>|...": a path may hold '|', so every split is tried.
  const size_t tag_end = key.find('|');
  if (tag_end == std::string_view::npos || tag_end < 2 || key[0] != 'v') return false;
  for (size_t i = 1; i < tag_end; ++i) {
    if (std::isdigit(static_cast<unsigned char>(key[i])) == 0) return false;
  }
  const std::string_view rest = key.substr(tag_end + 1);
  bool ours = false;
  for (size_t bar = rest.find('|'); bar != std::string_view::npos; bar = rest.find('|', bar + 1)) {
    const auto it = by_path_.find(std::string(rest.substr(0, bar + 1)));
    if (it == by_path_.end()) continue;
    ours = true;
    for (size_t f : it->second) {
      if (IsCurrent(key, f)) return false;
    }
  }
  return ours;
}

}  // namespace shardfeed
