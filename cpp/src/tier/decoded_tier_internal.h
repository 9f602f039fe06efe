// The decoded tier's entries (internal): row groups stored after decoding,
// column selection and the deterministic transforms, as aligned raw buffers
// that later epochs map from disk instead of decoding again.
//
// One file per (file identity, row group, columns, deterministic transforms):
//   "SFDT0003" | u64 key length | key | u64 column count | column records |
//   u64 digest of all that (the header) | u64 digest of the buffers |
//   64-byte-aligned buffers.
// The key is stored in the file and compared on load, so a hash collision or a
// changed input can never serve stale data; a truncated or foreign file is a
// miss.  Nothing in an entry is trusted: every load checks the header's digest
// before it uses a field, then every offset and size against the file (with
// unsigned, overflow-checked arithmetic) and every list against its values;
// the buffers' digest is checked the first time a process loads the entry
// (once per node and file: verified_stamp.h).  A damaged entry is a miss
// (counted as corrupt), decoded again and replaced.
// Files are written to a temporary name and renamed into place; temporaries of
// dead writers are removed when a tier opens (the flock protocol of
// storage/temp_file.h, shared with the file cache).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/catalog.h"
#include "shardfeed/decoded_tier.h"
#include "storage/posix_file.h"
#include "tier/entry_changes.h"
#include "tier/usage_ledger.h"
#include "transform/column.h"
#include "transform/layout.h"

namespace shardfeed {

struct DecodedTier::Impl {
  Impl(std::string dir, int64_t limit, int64_t used, bool read_only);

  // The identity of row group `rg` decoded under `layout` (only the
  // deterministic prefix of each column's transforms counts).
  static std::string Key(const Catalog& catalog, int32_t rg, const Layout& layout);

  // The columns of an entry, backed by a read-only memory map; nullopt on a miss.
  // `stored_digest`: what Store returned for the entry this thread has just
  // written, mapped in place of the decoded copy: such a load counts as
  // neither hit nor miss.  (Entries this process wrote are not hashed again
  // when the mapped file carries the digest it wrote; every other check is
  // made.)
  arrow::Result<std::optional<std::vector<DecodedColumn>>> Load(
      const std::string& key, std::optional<uint64_t> stored_digest = std::nullopt);
  // The entry's lock ("<hash>.lock" beside it, flock: across processes and
  // threads), taken before its Load and held until a miss is decoded and
  // stored, so that the processes and threads of a node sharing the tier
  // decode each row group once: the others wait and then map it.  Waits in
  // short sleeps, or in `help()` when given (other work of the caller's:
  // true when it did some, and the lock is tried again at once): Cancelled
  // once `stopped()`; after kEntryLockWait seconds, or when the lock file
  // cannot be made, an unlocked result (the caller decodes too: twice, never
  // stuck).
  static constexpr double kEntryLockWait = 120;
  arrow::Result<storage_internal::LockedFd> LockEntry(const std::string& key,
                                                      const std::function<bool()>& stopped,
                                                      const std::function<bool()>& help = {}) const;
  // Stores the columns; a failure to write degrades to not storing (counted).
  // Returns the buffers' digest written, nullopt when it wrote nothing (the
  // limit, or a failed write).
  // `why`, when given, says why nothing was stored (the limit, a write error).
  // `make_room`, when given, is called (once) when the entry does not fit the
  // limit, and the limit is checked again after it.
  std::optional<uint64_t> Store(const std::string& key, const std::vector<DecodedColumn>& columns,
                                int64_t rows, std::string* why = nullptr,
                                const std::function<void()>& make_room = nullptr);
  // Removes the entries `catalog` has superseded (superseded.h) that no one
  // holds, once per catalog version in this process (later calls, and calls
  // that waited for a concurrent one: 0); returns the bytes freed.  A process
  // mapping one keeps reading it.
  int64_t PruneSuperseded(const Catalog& catalog);
  // Removes the entry at `path`, mapped as `bytes` bytes, that lost pages
  // while it was read (watched_map.h), and takes those bytes off the folder's
  // count: it is decoded and stored again.
  void RemoveDamaged(const std::string& path, int64_t bytes);

  DecodedTierStats stats() const;
  std::string PathOf(const std::string& key) const;
  // The entry's lock file, which also holds its verified stamp
  // (verified_stamp.h).
  std::string LockPathOf(const std::string& key) const;

  const std::string dir_;
  const int64_t limit_;
  // The folder cannot be written by this process (DecodedTier::Open): entries
  // are loaded (each hashed once per process, as no stamp can be left), never
  // stored, locked, pruned or removed.
  const bool read_only_;
  // The folder's bytes, shared by the processes that use it (usage_ledger.h).
  std::unique_ptr<UsageLedger> usage_;
  std::atomic<int64_t> hits_{0}, misses_{0}, stored_{0}, skipped_{0}, corrupt_{0};
  std::atomic<int64_t> digests_checked_{0};  // entries whose buffers this process hashed
  std::atomic<bool> warned_{false};
  std::mutex mu_;
  std::set<std::string> verified_;  // entries whose digest this process checked or wrote
  std::mutex prune_mu_;
  std::set<uint64_t> pruned_;  // catalog versions PruneSuperseded ran for (under prune_mu_)
  // Entries changed in place by another program (entry_changes.h): a load
  // takes a mark before it maps, a reader checks after reading.
  const std::shared_ptr<EntryChanges> changes_ = EntryChanges::For(dir_);
};

// Test hook (the fuzz target): rewrites the two digests of an entry's bytes to
// match its header and buffers, so that mutated entries reach the checks
// behind the digests; leaves bytes whose header does not parse as they are.
void SealDecodedTierEntryForTesting(std::string* entry);

}  // namespace shardfeed
