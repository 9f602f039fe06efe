#include "util/redact.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace shardfeed {

namespace {

constexpr char kMask[] = "***";

bool IsSecretKey(std::string key) {
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"key", "secret", "token", "password", "credential", "signature"}) {
    if (key.find(word) != std::string::npos) return true;
  }
  return key == "sig";
}

// Where the user info of `uri` lies ("KEY:SECRET" in "s3://KEY:SECRET@b/x"):
// [begin, end) before the '@'; begin == end when there is none.
std::pair<size_t, size_t> UserInfo(const std::string& uri) {
  const size_t scheme = uri.find("://");
  if (scheme == std::string::npos) return {0, 0};
  const size_t begin = scheme + 3;
  const size_t authority_end = std::min(uri.find_first_of("/?#", begin), uri.size());
  // The last '@' of the authority: a secret may itself hold an '@'.
  const size_t at = uri.rfind('@', authority_end == 0 ? 0 : authority_end - 1);
  if (at == std::string::npos || at < begin) return {begin, begin};
  return {begin, at};
}

// Whether the user name of `uri`'s user info names something rather than
// authenticates: Azure's container ("abfs://container@account.dfs..."), GCS's
// "anonymous" ("gs://anonymous@bucket").  Only a password after it is secret.
bool UserIsAName(const std::string& uri) {
  std::string scheme = uri.substr(0, uri.find("://"));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return scheme == "abfs" || scheme == "abfss" || scheme == "gs" || scheme == "gcs";
}

// The secret values in `uri`: user info parts and secret query values.
std::vector<std::string> Secrets(const std::string& uri) {
  std::vector<std::string> out;
  const auto [begin, end] = UserInfo(uri);
  if (end > begin) {
    const std::string info = uri.substr(begin, end - begin);
    const size_t colon = info.find(':');
    if (UserIsAName(uri)) {
      if (colon != std::string::npos) out.push_back(info.substr(colon + 1));
    } else {
      out.push_back(info);
      if (colon != std::string::npos) {
        out.push_back(info.substr(0, colon));
        out.push_back(info.substr(colon + 1));
      }
    }
  }
  const size_t query = uri.find('?');
  if (query != std::string::npos) {
    size_t pos = query + 1;
    while (pos <= uri.size()) {
      size_t amp = uri.find('&', pos);
      if (amp == std::string::npos) amp = uri.size();
      const std::string pair = uri.substr(pos, amp - pos);
      const size_t eq = pair.find('=');
      if (eq != std::string::npos && IsSecretKey(pair.substr(0, eq))) {
        out.push_back(pair.substr(eq + 1));
      }
      pos = amp + 1;
    }
  }
  // Longest first, so that a part never leaves the rest of a longer secret.
  out.erase(std::remove_if(out.begin(), out.end(), [](const auto& s) { return s.empty(); }),
            out.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return out;
}

}  // namespace

std::string RedactUri(const std::string& uri) {
  if (uri.find("://") == std::string::npos) return uri;
  std::string out = uri;
  const size_t query = out.find('?');
  if (query != std::string::npos) {
    std::string rebuilt = out.substr(0, query + 1);
    size_t pos = query + 1;
    while (pos <= out.size()) {
      size_t amp = out.find('&', pos);
      if (amp == std::string::npos) amp = out.size();
      const std::string pair = out.substr(pos, amp - pos);
      const size_t eq = pair.find('=');
      if (eq != std::string::npos && IsSecretKey(pair.substr(0, eq))) {
        rebuilt += pair.substr(0, eq + 1) + kMask;
      } else {
        rebuilt += pair;
      }
      if (amp < out.size()) rebuilt += '&';
      pos = amp + 1;
    }
    out = rebuilt;
  }
  auto [begin, end] = UserInfo(out);
  if (end > begin && UserIsAName(out)) {
    const size_t colon = out.find(':', begin);
    begin = colon < end ? colon + 1 : end;  // the name stays; a password goes
  }
  if (end > begin) out.replace(begin, end - begin, kMask);
  return out;
}

std::string RedactSecrets(std::string message, const std::string& uri) {
  // A short value ("c", "AK") is also part of many words: masked where it
  // stands alone, so that a message keeps its words.  Longer ones wherever
  // they are.
  constexpr size_t kShort = 8;
  const auto word = [&](size_t at) {
    return at < message.size() && std::isalnum(static_cast<unsigned char>(message[at]));
  };
  for (const auto& secret : Secrets(uri)) {
    for (size_t at = message.find(secret); at != std::string::npos;) {
      if (secret.size() < kShort && ((at > 0 && word(at - 1)) || word(at + secret.size()))) {
        at = message.find(secret, at + 1);
        continue;
      }
      message.replace(at, secret.size(), kMask);
      at = message.find(secret, at + sizeof(kMask) - 1);
    }
  }
  return message;
}

}  // namespace shardfeed
