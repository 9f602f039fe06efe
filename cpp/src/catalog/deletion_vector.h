// Delta Lake deletion vectors (internal).
//
// A DELETE, UPDATE or MERGE on a table with the `deletionVectors` feature does
// not rewrite the files it touches: it records, for each such file, the
// indices of its rows that are gone (a deletion vector, "DV").  The rows stay
// in the Parquet file; a reader must skip them.  A DV is kept inline in the
// log (storage type 'i', Z85 text), or in a `.bin` file of the table named by
// a UUID ('u') or by an absolute URI ('p').
//
// The serialized DV is a RoaringBitmapArray: a magic number, then 64-bit row
// indices as 32-bit Roaring bitmaps (RoaringFormatSpec), one per value of the
// high 32 bits.  The portable format (what writers write) and the native one
// (the protocol's own example) are read.  A `.bin` file starts with a version
// byte (1); at the descriptor's offset it holds the DV's size (big-endian),
// the DV, and its CRC-32 (big-endian).  Every length, key and count is
// checked: a damaged DV is an error naming the file, never a wrong row set.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/result.h>

#include "shardfeed/catalog.h"

namespace shardfeed {

// The `deletionVector` of an add action.
struct DeletionVectorDescriptor {
  std::string storage_type;    // "u", "i" or "p"
  std::string path_or_inline;  // pathOrInlineDv
  std::optional<int64_t> offset;
  int64_t size_in_bytes = 0;
  int64_t cardinality = 0;

  // The protocol's uniqueId: the storage type, the text, and "@offset" when set.
  std::string UniqueId() const;
};

// Z85 (ZeroMQ's base85) text to bytes: 5 characters make 4 bytes.  An error for
// a length not a multiple of 5, a character outside the alphabet, or a group
// above 2^32 - 1.
arrow::Result<std::string> Z85Decode(std::string_view text);

// The row indices a serialized RoaringBitmapArray holds, as sorted disjoint
// runs (adjacent runs merged).
arrow::Result<std::vector<RowRun>> ParseDeletionVector(std::string_view bytes);

// The runs of rows [begin, end) of a file that `deleted` (null: none) leaves.
std::vector<RowRun> LiveRuns(const DeletedRows* deleted, int64_t begin, int64_t end);

// The path on `fs` of a DV's file ('u': below `root`, 'p': its URI); an error
// for an inline DV or a path that leaves the table.
arrow::Result<std::string> DeletionVectorFile(const arrow::fs::FileSystem& fs,
                                              const std::string& root,
                                              const DeletionVectorDescriptor& dv);

// Reads the DVs of one table; a DV file holding several is opened once.
class DeletionVectorReader {
 public:
  DeletionVectorReader(arrow::fs::FileSystem& fs, std::string root, double remote_timeout)
      : fs_(fs), root_(std::move(root)), remote_timeout_(remote_timeout) {}
  // The rows `dv` deletes, checked against its size, CRC and cardinality.
  arrow::Result<std::shared_ptr<const DeletedRows>> Read(const DeletionVectorDescriptor& dv);

 private:
  arrow::Result<std::string> Stored(const DeletionVectorDescriptor& dv);

  arrow::fs::FileSystem& fs_;
  std::string root_;
  double remote_timeout_;
  struct Opened {
    std::shared_ptr<arrow::io::RandomAccessFile> file;
    std::shared_ptr<arrow::Buffer> whole;  // the file's bytes, when it was small
    int64_t size = 0;
  };
  std::map<std::string, Opened> open_;
};

}  // namespace shardfeed
