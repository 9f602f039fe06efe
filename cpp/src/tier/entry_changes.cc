#include "tier/entry_changes.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace shardfeed {

namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool IsHexNamed(std::string_view name, std::string_view suffix) {
  if (name.size() != 16 + suffix.size() || name.substr(16) != suffix) return false;
  return std::all_of(name.begin(), name.begin() + 16,
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

std::shared_ptr<EntryChanges> EntryChanges::For(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<EntryChanges>> watches;
  std::lock_guard<std::mutex> lock(mu);
  auto& weak = watches[dir];
  auto shared = weak.lock();
  if (!shared) {
    shared = std::make_shared<EntryChanges>(dir);
    weak = shared;
  }
  return shared;
}

EntryChanges::~EntryChanges() {
  if (fd_ >= 0 && pid_ == ::getpid()) ::close(fd_);
}

void EntryChanges::OpenLocked() {
  const pid_t pid = ::getpid();
  if (pid_ == pid) return;
  // A forked child's copy reads the parent's queue: it would take its events.
  if (fd_ >= 0) ::close(fd_);
  pid_ = pid;
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) return;
  if (::inotify_add_watch(fd_, dir_.c_str(), IN_MODIFY) < 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void EntryChanges::ReadLocked() {
  OpenLocked();
  if (fd_ < 0) return;
  alignas(struct inotify_event) char buffer[4096];
  while (true) {
    const ssize_t got = ::read(fd_, buffer, sizeof buffer);
    if (got <= 0) return;  // EAGAIN: nothing more queued
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= got;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) {
        overflowed_at_ = ++count_;
        any_.store(true);
      } else if (event->len > 0 && IsHexNamed(event->name, ".sfd")) {  // entries only
        last_[event->name] = ++count_;
        any_.store(true);
      }
    }
  }
}

uint64_t EntryChanges::Mark() {
  std::lock_guard<std::mutex> lock(mu_);
  ReadLocked();
  return count_;
}

bool EntryChanges::ChangedSince(const std::string& path, uint64_t mark, int64_t bytes) {
  if (!any_.load()) return false;  // the common case: no lookup
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = last_.find(BaseName(path));
  if (it != last_.end() && it->second > mark) return true;
  if (overflowed_at_ <= mark) return false;
  // Changes were lost: the entry's size says whether it was cut short.  (One
  // renamed over it is another file, and leaves the mapped one whole.)
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && st.st_size < bytes;
}

}  // namespace shardfeed
