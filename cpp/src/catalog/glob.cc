#include "catalog/glob.h"

#include <algorithm>
#include <cstddef>
#include <set>

namespace shardfeed {

namespace {

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    if (end > at) out.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// How many of a pattern's leading components have no pattern character.
size_t FixedCount(const std::vector<std::string_view>& parts) {
  size_t fixed = 0;
  while (fixed < parts.size() && !HasGlobMagic(parts[fixed])) ++fixed;
  return fixed;
}

// A `[...]` set at pattern[i] (i at '['): whether it matches `c`, and where it
// ends (one past ']'); npos when unclosed (then '[' is a plain character).
size_t MatchSet(std::string_view pattern, size_t i, char c, bool* matched) {
  size_t j = i + 1;
  const bool negate = j < pattern.size() && pattern[j] == '!';  // ('^' is itself, as in fnmatch)
  if (negate) ++j;
  bool found = false;
  const size_t first = j;
  while (j < pattern.size() && (pattern[j] != ']' || j == first)) {
    const char lo = pattern[j];
    if (j + 2 < pattern.size() && pattern[j + 1] == '-' && pattern[j + 2] != ']') {
      const char hi = pattern[j + 2];
      if (lo <= c && c <= hi) found = true;
      j += 3;
    } else {
      if (lo == c) found = true;
      ++j;
    }
  }
  if (j >= pattern.size()) return std::string_view::npos;
  *matched = found != negate;
  return j + 1;
}

// One pattern character against name[n] ('*' excluded): whether it matches, and
// where the pattern goes on.
bool MatchOne(std::string_view pattern, size_t* p, char c) {
  if (pattern[*p] == '?') {
    ++*p;
    return true;
  }
  if (pattern[*p] == '[') {
    bool matched = false;
    const size_t end = MatchSet(pattern, *p, c, &matched);
    if (end != std::string_view::npos) {
      *p = end;
      return matched;
    }
  }
  return pattern[(*p)++] == c;
}

// A name a wildcard stands for: not a hidden one ('.'), unless the pattern
// component asks for it.
bool Matches(std::string_view pattern, std::string_view name) {
  if (!name.empty() && name.front() == '.' && (pattern.empty() || pattern.front() != '.')) {
    return false;
  }
  return MatchComponent(pattern, name);
}

// Whether the components match; `memo` (one entry per (i, j): 0 unknown, 1 no,
// 2 yes) keeps patterns with several "**" polynomial.
bool MatchParts(const std::vector<std::string_view>& pattern, size_t i,
                const std::vector<std::string_view>& parts, size_t j, std::vector<char>* memo) {
  char& known = (*memo)[i * (parts.size() + 1) + j];
  if (known != 0) return known == 2;
  bool yes;
  if (i == pattern.size()) {
    yes = j == parts.size();
  } else if (pattern[i] == "**") {
    yes =
        MatchParts(pattern, i + 1, parts, j, memo) ||
        (j < parts.size() && parts[j].front() != '.' && MatchParts(pattern, i, parts, j + 1, memo));
  } else {
    yes = j < parts.size() && Matches(pattern[i], parts[j]) &&
          MatchParts(pattern, i + 1, parts, j + 1, memo);
  }
  known = yes ? 2 : 1;
  return yes;
}

}  // namespace

bool HasGlobMagic(std::string_view path) {
  return path.find_first_of("*?[") != std::string_view::npos;
}

bool MatchComponent(std::string_view pattern, std::string_view name) {
  // Linear backtracking: on a mismatch only the last '*' takes one more
  // character (every other element consumes exactly one), so no pattern costs
  // more than its length times the name's.
  size_t p = 0, n = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = ++p;
      resume = n;
      continue;
    }
    size_t next = p;
    if (p < pattern.size() && MatchOne(pattern, &next, name[n])) {
      p = next;
      ++n;
      continue;
    }
    if (star == std::string_view::npos) return false;
    p = star;
    n = ++resume;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string GlobFixedPart(const std::string& pattern) {
  const auto parts = Components(pattern);
  std::string fixed;
  for (size_t i = 0; i < FixedCount(parts); ++i) {
    if (i > 0 || (!pattern.empty() && pattern.front() == '/')) fixed += '/';
    fixed.append(parts[i]);
  }
  return fixed;
}

int GlobDepth(const std::string& pattern) {
  const auto all = Components(pattern);
  const size_t fixed = FixedCount(all);
  for (size_t i = fixed; i < all.size(); ++i) {
    if (all[i] == "**") return -1;
  }
  return static_cast<int>(all.size() - fixed);
}

std::vector<std::string> MatchGlob(const std::string& pattern,
                                   const std::vector<std::string>& files) {
  const auto all = Components(pattern);
  const size_t fixed = FixedCount(all);
  const std::vector<std::string_view> wanted(all.begin() + static_cast<std::ptrdiff_t>(fixed),
                                             all.end());
  const std::set<std::string_view> named(wanted.begin(), wanted.end());
  std::set<std::string> out;
  for (const auto& file : files) {
    const auto parts = Components(file);
    if (parts.size() <= fixed ||
        !std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(fixed), parts.begin())) {
      continue;
    }
    const std::vector<std::string_view> below(parts.begin() + static_cast<std::ptrdiff_t>(fixed),
                                              parts.end());
    // The file itself and each folder above it, below the fixed part.
    for (size_t k = 1; k <= below.size(); ++k) {
      const std::vector<std::string_view> head(below.begin(),
                                               below.begin() + static_cast<std::ptrdiff_t>(k));
      std::vector<char> memo((wanted.size() + 1) * (head.size() + 1), 0);
      if (!MatchParts(wanted, 0, head, 0, &memo)) continue;
      // A "_" name is not data (_temporary/, _delta_log/) unless the pattern
      // names it: literally, or by a component that starts with "_" itself
      // (`_stag*`), as `.*` names hidden ones.
      const bool hidden = std::any_of(head.begin(), head.end(), [&](std::string_view p) {
        return p.front() == '_' && named.count(p) == 0 &&
               std::none_of(wanted.begin(), wanted.end(), [&](std::string_view w) {
                 return !w.empty() && w.front() == '_' && MatchComponent(w, p);
               });
      });
      if (hidden) continue;
      // The path as the listing spells it, cut after component k.
      size_t cut = 0;
      for (size_t seen = 0; seen < fixed + k; ++seen) {
        cut = file.find_first_not_of('/', cut);
        cut = std::min(file.find('/', cut), file.size());
      }
      out.insert(file.substr(0, cut));
    }
  }
  // A path below another match is read with that folder: listing it again would
  // only cost requests (`ds/**` matches every folder).
  std::vector<std::string> kept;
  for (const auto& path : out) {
    bool below = false;
    for (size_t slash = path.find('/'); slash != std::string::npos && !below;
         slash = path.find('/', slash + 1)) {
      below = slash > 0 && out.count(path.substr(0, slash)) > 0;
    }
    if (!below) kept.push_back(path);
  }
  return kept;
}

}  // namespace shardfeed
