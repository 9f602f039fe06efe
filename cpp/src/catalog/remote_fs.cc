#include "catalog/remote_fs.h"

#include <algorithm>
#include <any>
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <utility>

#include "util/deadline_file.h"

namespace shardfeed {
namespace {

constexpr int64_t kFirstWaitMs = 100;
constexpr int64_t kLongestWaitMs = 5000;
// One request's retries wait at most this long whatever remote_timeout is:
// a request read asynchronously (file cache downloads) and then abandoned
// is not seen by CallAbandoned, and retries on alone.  Longer outages are
// ridden out by shardfeed's own retries of a read (RetryPolicy).
constexpr double kLongestRequestRetrySeconds = 10;

// The most the `retries`-th wait (0-based) lasts; jitter only shortens it.
int64_t LongestWaitMs(int64_t retries) {
  if (retries >= 6) return kLongestWaitMs;  // 100 << 6 > 5000
  return std::min(kLongestWaitMs, kFirstWaitMs << retries);
}

class BoundedRetry final : public arrow::fs::S3RetryStrategy {
 public:
  explicit BoundedRetry(double budget_seconds)
      : budget_ms_(budget_seconds > 0 && std::isfinite(budget_seconds)
                       ? static_cast<int64_t>(std::min(budget_seconds, 1e9) * 1000)
                       : 0) {}

  bool ShouldRetry(const AWSErrorDetail& error, int64_t attempted_retries) override {
    if (!error.should_retry || attempted_retries < 0 || CallAbandoned()) return false;
    // Waits 0..attempted_retries, at their longest, stay within the budget.
    int64_t total = 0;
    for (int64_t k = 0; k <= attempted_retries; ++k) {
      total += LongestWaitMs(k);
      if (total > budget_ms_) return false;
    }
    return true;
  }

  int64_t CalculateDelayBeforeNextRetry(const AWSErrorDetail& /*error*/,
                                        int64_t attempted_retries) override {
    const int64_t longest = LongestWaitMs(std::max<int64_t>(attempted_retries, 0));
    // Between half and all of it: ranks retrying together spread out.
    thread_local std::minstd_rand random{std::random_device{}()};
    return longest / 2 + static_cast<int64_t>(random() % static_cast<uint64_t>(longest / 2 + 1));
  }

 private:
  const int64_t budget_ms_;
};

std::string_view SchemeOf(const std::string& uri) {
  const auto end = uri.find("://");
  return end == std::string::npos ? std::string_view() : std::string_view(uri).substr(0, end);
}

// Whether the URI's query (between '?' and any '#') sets option `name`: an
// object key that merely contains "name=" does not.
bool QuerySets(const std::string& uri, std::string_view name) {
  const auto fragment = uri.find('#');
  const auto query = uri.find('?');
  if (query == std::string::npos || query > fragment) return false;
  const std::string_view all = std::string_view(uri).substr(
      query + 1, fragment == std::string::npos ? std::string::npos : fragment - query - 1);
  for (size_t at = 0;;) {
    const size_t amp = all.find('&', at);
    const std::string_view part = all.substr(at, amp == std::string::npos ? amp : amp - at);
    if (part.size() > name.size() && part.substr(0, name.size()) == name &&
        part[name.size()] == '=') {
      return true;
    }
    if (amp == std::string::npos) return false;
    at = amp + 1;
  }
}

}  // namespace

std::shared_ptr<arrow::fs::S3RetryStrategy> MakeBoundedRetry(double budget_seconds) {
  return std::make_shared<BoundedRetry>(budget_seconds);
}

arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> MakeRemoteFileSystem(const std::string& uri,
                                                                           double remote_timeout,
                                                                           std::string* path) {
  if (!(remote_timeout > 0)) return arrow::fs::FileSystemFromUriOrPath(uri, path);
  const double budget = std::min(remote_timeout / 2, kLongestRequestRetrySeconds);
  const std::string_view scheme = SchemeOf(uri);
  if (scheme == "s3") {
    arrow::fs::FileSystemFactoryOptions options;
    options.emplace_back("retry_strategy", MakeBoundedRetry(budget));
    return arrow::fs::FileSystemFromUriAndOptions(uri, options, path);
  }
  if ((scheme == "gs" || scheme == "gcs") && !QuerySets(uri, "retry_limit_seconds")) {
    const auto fragment = uri.find('#');
    std::string with = uri.substr(0, fragment);
    if (with.find('?') == std::string::npos) {
      with += '?';
    } else if (with.back() != '?' && with.back() != '&') {
      with += '&';
    }
    with += "retry_limit_seconds=" + std::to_string(budget);
    if (fragment != std::string::npos) with += uri.substr(fragment);
    return arrow::fs::FileSystemFromUriOrPath(with, path);
  }
  return arrow::fs::FileSystemFromUriOrPath(uri, path);
}

std::string StorageId(const std::string& fs_type, const std::string& redacted_uri,
                      const char* aws_endpoint) {
  const auto query = redacted_uri.find('?');
  std::string id =
      fs_type + "|" + (query == std::string::npos ? "" : redacted_uri.substr(query + 1));
  if (fs_type == "s3" && aws_endpoint) id.append("|").append(aws_endpoint);
  const auto scheme = redacted_uri.find("://");
  if ((fs_type == "abfs" || fs_type == "hdfs") && scheme != std::string::npos) {
    const auto begin = scheme + 3;
    auto end = redacted_uri.find_first_of("/?#", begin);
    if (end == std::string::npos) end = redacted_uri.size();
    std::string authority = redacted_uri.substr(begin, end - begin);
    const auto at = authority.rfind('@');
    if (at != std::string::npos) authority.erase(0, at + 1);
    id.append("|host=").append(authority);
  }
  return id;
}

}  // namespace shardfeed
