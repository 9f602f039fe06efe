// The bytes a decoded-tier folder holds, counted once for every process that
// uses it (internal).
//
// Every rank on a node, and every DataLoader worker, opens the tier folder on
// its own.  Each used to count the bytes it found when it opened the folder
// plus what it stored itself, so that N processes storing at once could write
// N times `cache_limit_bytes`.  The count now lives in a file of the folder
// ("shardfeed.usage", 8 bytes, little-endian), read and written under an
// exclusive flock for each reservation, so that one process's stores are seen
// by the next reservation of any other.
//
// The count is a reservation, not a scan: it is set from a scan of the folder
// whenever a tier opens (under the folder's exclusive creation lock, so the
// count follows removals by other programs and the stores of killed
// processes), and moved by every store, failed store and removal of ours in
// between (an entry stored over a damaged one gives back the old file's
// bytes).  A store another process reserved but had not begun to write when a
// tier opened is missed by that scan, until the next open.  A folder, FIFO or
// link in the file's place is removed; a file that cannot be read as a count
// is written again with this process's.  Where the file cannot be made (a
// read-only folder), the count is this process's own, as before.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace shardfeed {

inline constexpr char kUsageName[] = "shardfeed.usage";

class UsageLedger {
 public:
  // The ledger of the folder whose file is `path`, its count set to
  // `scanned` (the bytes a scan just found).
  UsageLedger(const std::string& path, int64_t scanned);
  ~UsageLedger();
  UsageLedger(const UsageLedger&) = delete;
  UsageLedger& operator=(const UsageLedger&) = delete;

  // Adds `bytes` to the count unless that would pass `limit` (0: none);
  // returns whether it did.  `*seen`: the count it found.
  bool Reserve(int64_t bytes, int64_t limit, int64_t* seen);
  // Takes `bytes` off the count (not below zero).
  void Release(int64_t bytes);
  // The count, read now.
  int64_t Count();
  // The count as this process last saw it (no I/O).
  int64_t Seen() const;
  // Whether the count is shared with other processes (the file is in use).
  bool shared() const { return fd_ >= 0; }

 private:
  // Runs `change(count) -> new count` under the file's lock (and mu_).
  template <typename F>
  int64_t Update(F change);

  int fd_ = -1;
  std::mutex mu_;  // flock excludes other processes, not this one's threads
  std::atomic<int64_t> local_{0};
};

}  // namespace shardfeed
