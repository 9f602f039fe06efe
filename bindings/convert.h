// The one place where core Status values become Python exceptions, and where
// batches become NumPy arrays with owners.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/batch.h"

namespace shardfeed::py {

// Carries a failed Status across the binding boundary; translated to the
// matching class of shardfeed._errors by the registered translator.
class StatusError : public std::exception {
 public:
  explicit StatusError(arrow::Status status);
  const char* what() const noexcept override { return message_.c_str(); }
  const arrow::Status& status() const { return status_; }
  const std::string& message() const { return message_; }

 private:
  arrow::Status status_;
  std::string message_;
};

inline void Check(const arrow::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T Unwrap(arrow::Result<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).ValueUnsafe();
}

void RegisterErrorTranslator();

// Paths cross the boundary as os.fsdecode and os.fsencode carry them: bytes
// that are not UTF-8 (a Latin-1 file name) as lone surrogates, so that every
// name the catalog lists can be named back to it.
nanobind::str PathToPython(const std::string& path);
std::string PathFromPython(const nanobind::str& path);
std::vector<std::string> PathsFromPython(const std::vector<nanobind::str>& paths);

// {name: numpy.ndarray}; each array owns a reference to its C++ buffer.
nanobind::dict BatchToDict(const Batch& batch);

}  // namespace shardfeed::py
