#include "shardfeed/status.h"

#include <memory>
#include <utility>

namespace shardfeed {

namespace {
constexpr char kTypeId[] = "shardfeed::ErrorDetail";
}

const char* ErrorDetail::type_id() const { return kTypeId; }

std::string ErrorDetail::ToString() const {
  return "shardfeed error kind " + std::to_string(static_cast<int>(kind_));
}

arrow::Status Error(ErrorKind kind, std::string message) {
  arrow::StatusCode code = arrow::StatusCode::Invalid;
  switch (kind) {
    case ErrorKind::kNotFound:
    case ErrorKind::kStorage:
      code = arrow::StatusCode::IOError;
      break;
    case ErrorKind::kColumnNotFound:
      code = arrow::StatusCode::KeyError;
      break;
    case ErrorKind::kUnsupportedType:
      code = arrow::StatusCode::TypeError;
      break;
    default:
      code = arrow::StatusCode::Invalid;
  }
  return arrow::Status(code, std::move(message), std::make_shared<ErrorDetail>(kind));
}

ErrorKind KindOf(const arrow::Status& status) {
  const auto& detail = status.detail();
  if (detail && detail->type_id() == std::string(kTypeId)) {
    return static_cast<const ErrorDetail&>(*detail).kind();
  }
  switch (status.code()) {
    case arrow::StatusCode::KeyError:
      return ErrorKind::kColumnNotFound;
    case arrow::StatusCode::TypeError:
    case arrow::StatusCode::NotImplemented:
      return ErrorKind::kUnsupportedType;
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::SerializationError:
      return ErrorKind::kInvalidData;
    default:
      return ErrorKind::kStorage;
  }
}

arrow::Status WithContext(const arrow::Status& status, const std::string& context) {
  if (status.ok()) return status;
  // Out of memory stays itself: the binding raises MemoryError for it.
  if (status.IsOutOfMemory()) return arrow::Status::OutOfMemory(context + ": " + status.message());
  // Arrow keeps an OS error's cause (errno, "Permission denied") in a detail
  // that message() leaves out; ours carries only the kind.
  std::string message = status.message();
  const auto& detail = status.detail();
  if (detail && detail->type_id() != std::string(kTypeId)) {
    const std::string why = detail->ToString();
    if (!why.empty() && message.find(why) == std::string::npos) message += " (" + why + ")";
  }
  return Error(KindOf(status), context + ": " + message);
}

}  // namespace shardfeed
