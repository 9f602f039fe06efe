// The node-local caches: whole remote files (FileCache) and decoded row
// groups (DecodedTier).  Opening, scanning and clearing touch the disk, so
// each releases the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <string>
#include <utility>

#include "convert.h"
#include "gil.h"
#include "register.h"
#include "shardfeed/cache.h"
#include "shardfeed/catalog.h"
#include "shardfeed/decoded_tier.h"
#include "shardfeed/status.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {

void RegisterCache(nb::module_& m) {
  nb::class_<CacheOptions>(m, "CacheOptions")
      .def(nb::init<>())
      .def_rw("limit_bytes", &CacheOptions::limit_bytes)
      .def(
          "validate", [](const CacheOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a limit out of range.");

  nb::class_<DecodedTier>(m, "DecodedTier")
      .def(
          "stats",
          [](const DecodedTier& t) {
            const auto s = t.stats();
            nb::dict d;
            d["decoded_hits"] = s.hits;
            d["decoded_misses"] = s.misses;
            d["decoded_stored_bytes"] = s.stored_bytes;
            d["decoded_skipped"] = s.skipped;
            d["decoded_bytes"] = s.bytes_on_disk;
            d["decoded_corrupt"] = s.corrupt;
            return d;
          },
          nb::sig("def stats(self) -> dict[str, int]"))
      .def(
          "usage",
          [](const DecodedTier& t) {
            DecodedTierUsage u;
            {
              ReleaseGil release;
              u = Unwrap(t.Usage());
            }
            return std::make_pair(u.entries, u.bytes);
          },
          "(entries, bytes) in the folder, scanned now.")
      .def(
          "clear",
          [](DecodedTier& t) {
            ReleaseGil release;
            return Unwrap(t.Clear());
          },
          "Removes every complete entry; returns the bytes freed.")
      .def_prop_ro("dir", &DecodedTier::dir)
      .def_prop_ro("read_only", &DecodedTier::read_only,
                   "Whether the folder opened read-only: entries served, none stored.");
  nb::class_<FileCache>(m, "FileCache")
      .def(
          "stats",
          [](const FileCache& c) {
            const auto s = c.stats();
            nb::dict d;
            d["remote_bytes"] = s.remote_bytes;
            d["cache_hits"] = s.cache_hits;
            d["cache_misses"] = s.cache_misses;
            d["cache_bytes"] = s.cache_bytes;
            d["evictions"] = s.evictions;
            d["uncached_reads"] = s.uncached_reads;
            d["fetch_seconds"] = s.fetch_seconds;
            d["prefetch_wait_seconds"] = s.prefetch_wait_seconds;
            return d;
          },
          nb::sig("def stats(self) -> dict[str, typing.Any]"))
      .def("usage",
           [](const FileCache& c) {
             CacheUsage u;
             {
               ReleaseGil release;
               u = Unwrap(c.Usage());
             }
             return std::make_pair(u.entries, u.bytes);
           })
      .def("clear",
           [](FileCache& c) {
             ReleaseGil release;
             return Unwrap(c.Clear());
           })
      .def(
          "warm",
          [](FileCache& c, const DatasetHandle& d, size_t file) {
            ReleaseGil release;
            const auto& catalog = *d.catalog;
            if (file >= catalog.files().size()) {
              throw StatusError(Error(ErrorKind::kInvalidArgument, "no such file"));
            }
            const auto& f = catalog.files()[file];
            return Unwrap(
                c.Warm(catalog.filesystem(),
                       {CacheKey(catalog, static_cast<int32_t>(file)), f.path, f.size, f.version}));
          },
          "dataset"_a, "file"_a, "Downloads file number `file` of the dataset unless cached.");
  m.def(
      "open_file_cache",
      [](const std::string& dir, int64_t limit_bytes, double remote_timeout) {
        ReleaseGil release;
        CacheOptions options;
        options.dir = dir;
        options.limit_bytes = limit_bytes;
        options.remote_timeout = remote_timeout;
        return Unwrap(FileCache::Open(options));
      },
      "dir"_a, "limit_bytes"_a, "remote_timeout"_a = CacheOptions{}.remote_timeout,
      "remote_timeout: seconds without data after which a download gives up (0: never).");
  m.def(
      "open_decoded_tier",
      [](const std::string& dir, int64_t limit_bytes) {
        ReleaseGil release;  // scans the folder
        return Unwrap(DecodedTier::Open(dir, limit_bytes));
      },
      "dir"_a, "limit_bytes"_a);
}

}  // namespace shardfeed::py
