// Error kinds carried on arrow::Status so that the binding can map each to one
// Python exception class.  Inside the core every fallible call returns
// arrow::Status / arrow::Result<T>; nothing throws across this API.
#pragma once

#include <string>

#include <arrow/status.h>

namespace shardfeed {

enum class ErrorKind : int {
  kNotFound = 1,         // a path that does not exist
  kInvalidData = 2,      // not Parquet, truncated, corrupt page, nulls under "error" policy
  kSchemaMismatch = 3,   // files whose schemas disagree
  kColumnNotFound = 4,   // a requested column is missing
  kUnsupportedType = 5,  // a column type shardfeed cannot hand out
  kInvalidArgument = 6,  // bad settings (batch_size < 1, ...)
  kStateMismatch = 7,    // a state dict from another dataset or other settings
  kStorage = 8,          // other I/O failures
};

// A status detail that records which ErrorKind a Status stands for.
class ErrorDetail : public arrow::StatusDetail {
 public:
  explicit ErrorDetail(ErrorKind kind) : kind_(kind) {}
  const char* type_id() const override;
  std::string ToString() const override;
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Builds an error Status of the given kind.
arrow::Status Error(ErrorKind kind, std::string message);

// The ErrorKind of a status (kStorage for statuses made outside shardfeed).
ErrorKind KindOf(const arrow::Status& status);

// Prefixes the message with context ("file 'x', row group 3: ...") and keeps the kind.
arrow::Status WithContext(const arrow::Status& status, const std::string& context);

}  // namespace shardfeed
