// In-place changes to the decoded tier's entries (internal).
//
// An entry is written to a temporary name and renamed into place, so a write
// to an entry's own name is another program's: truncated or rewritten in
// place while this process maps it.  Pages past the new end take SIGBUS,
// which watched_map.h turns into an error; but the bytes past the end of the
// page that holds the new end read as zeros, with no signal.  An inotify watch
// on the folder sees the truncation (IN_MODIFY, queued before truncate()
// returns): a reader that checks after reading knows whether what it read
// may be zeros.
//
// The event comes at the end of the truncation, after the page is zeroed, so
// a read during it may see zeros before the event: the entry's size, set
// before the zeroing (ext4, tmpfs), is checked too (a stat after the reads),
// where the caller can afford a stat per entry.  Where inotify is not
// available (another OS, no instances left, an overflow, a network file system
// whose other clients it cannot see) the size and the SIGBUS check stand.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace shardfeed {

// The tier's entry file names: 16 hex digits (its key's hash) + `suffix`
// (".sfd" for an entry, ".lock" for its lock).
bool IsHexNamed(std::string_view name, std::string_view suffix);

class EntryChanges {
 public:
  // The one watch of `dir` in this process, shared by every tier open on it
  // while any holds it: inotify instances are few (128 per user by default).
  static std::shared_ptr<EntryChanges> For(const std::string& dir);

  explicit EntryChanges(std::string dir) : dir_(std::move(dir)) {}
  ~EntryChanges();
  EntryChanges(const EntryChanges&) = delete;
  EntryChanges& operator=(const EntryChanges&) = delete;

  // Reads the changes queued so far; returns their count, the mark a load
  // records before it maps an entry.  (In a forked child, a watch of its own.)
  uint64_t Mark();
  // Whether the entry at `path` (a file of the folder), mapped as `bytes`
  // bytes after Mark() returned `mark`, was changed in place since: an event
  // after the mark, or, with `check_size`, a size below `bytes` now (one
  // stat).  Reads no event: call Mark() once after the reads being checked.
  // (An entry stored again at that name later is mapped after a later mark.)
  bool ChangedSince(const std::string& path, uint64_t mark, int64_t bytes, bool check_size = true);

 private:
  void OpenLocked();
  void ReadLocked();

  const std::string dir_;
  std::mutex mu_;
  int fd_ = -1;
  pid_t pid_ = 0;  // the process fd_ belongs to
  uint64_t count_ = 0;
  std::map<std::string, uint64_t> last_;  // entry name -> the count at its last change
  std::atomic<bool> any_{false};          // a change seen
};

}  // namespace shardfeed
