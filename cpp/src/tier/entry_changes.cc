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
      // (An overflow loses events: the size check of ChangedSince stands.)
      if (event->len > 0 && IsHexNamed(event->name, ".sfd")) {  // entries only
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

bool EntryChanges::ChangedSince(const std::string& path, uint64_t mark, int64_t bytes,
                                bool check_size) {
  if (any_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = last_.find(BaseName(path));
    if (it != last_.end() && it->second > mark) return true;
  }
  // The size too: a truncation still in progress zeroes the page of
  // its new end before its event is queued (at the end of the syscall), so a
  // read of those zeros may come before the event.  The size is set before
  // the page is zeroed (ext4, tmpfs), so a stat after the reads sees it; and
  // when events were lost (an overflow) the size is all there is.  (One
  // renamed over the entry is another file, and leaves the mapped one whole.)
  if (!check_size) return false;
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && st.st_size < bytes;
}

}  // namespace shardfeed
