#include "util/parquet_error.h"

#include <new>
#include <stdexcept>
#include <utility>

#include <parquet/exception.h>

#include "shardfeed/status.h"

namespace shardfeed {

ErrorContext ErrorContext::WithColumn(std::string name) const {
  ErrorContext out = *this;
  out.column = std::move(name);
  return out;
}

std::string ErrorContext::ToString() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (!file.empty()) add("file '" + file + "'");
  if (row_group >= 0) add("row group " + std::to_string(row_group));
  if (!column.empty()) add("column '" + column + "'");
  return out;
}

namespace {

std::string Message(const ErrorContext& context, const std::string& what) {
  std::string prefix = context.ToString();
  std::string body = context.detail.empty() ? what : context.detail + " (" + what + ")";
  return prefix.empty() ? body : prefix + ": " + body;
}

bool HasKind(const arrow::Status& status) {
  return status.detail() &&
         std::string(status.detail()->type_id()) == ErrorDetail(ErrorKind::kStorage).type_id();
}

}  // namespace

arrow::Status ParquetStatus(const arrow::Status& status, const ErrorContext& context,
                            IoOutcome io) {
  if (status.ok()) return status;
  if (status.IsOutOfMemory()) return arrow::Status::OutOfMemory(Message(context, status.message()));
  if (status.IsCancelled()) return status;
  // A storage failure says nothing about the bytes: not "not a readable
  // Parquet file" (the context's detail) but that they could not be read.
  ErrorContext unread = context;
  if (!unread.detail.empty()) unread.detail = "cannot read it";
  if (HasKind(status)) {
    const ErrorKind kind = KindOf(status);
    return Error(kind, Message(kind == ErrorKind::kStorage ? unread : context, status.message()));
  }
  // Arrow's codecs report damaged compressed pages as IOError too: only a
  // caller that watched the reads can tell storage from bytes.
  const bool storage = status.IsIOError() && io == IoOutcome::kUnknown;
  return Error(storage ? ErrorKind::kStorage : ErrorKind::kInvalidData,
               Message(storage ? unread : context, status.message()));
}

arrow::Status ParquetExceptionStatus(const std::exception_ptr& error, const ErrorContext& context,
                                     IoOutcome io) {
  try {
    std::rethrow_exception(error);
  } catch (const parquet::ParquetStatusException& e) {
    return ParquetStatus(e.status(), context, io);
  } catch (const std::bad_alloc&) {
    return arrow::Status::OutOfMemory(Message(context, "out of memory"));
  } catch (const std::length_error& e) {
    // A length read from the file that no buffer can hold: bad bytes.
    return Error(ErrorKind::kInvalidData, Message(context, e.what()));
  } catch (const std::exception& e) {  // parquet::ParquetException and the rest
    return Error(ErrorKind::kInvalidData, Message(context, e.what()));
  } catch (...) {
    return Error(ErrorKind::kInvalidData, Message(context, "unknown error"));
  }
}

arrow::Status OutOfMemory(const std::string& context, int64_t bytes) {
  return arrow::Status::OutOfMemory(context + ": cannot allocate " + std::to_string(bytes) +
                                    " bytes");
}

}  // namespace shardfeed
