#include "catalog/column_mapping.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <arrow/type.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

constexpr int kMaxDepth = 128;  // a schema nests structs, arrays and maps; deeper is damage

// A JSON value, enough for a schema: strings, objects and arrays (numbers,
// booleans and null are kept as their text, unused).
struct Json {
  enum Kind { kString, kObject, kArray, kOther } kind = kOther;
  std::string text;               // kString: the decoded string
  std::vector<std::string> keys;  // kObject: its keys, in order, and their values
  std::vector<Json> values;
  std::vector<Json> items;  // kArray

  const Json* Get(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &values[i];
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  arrow::Result<Json> Document() {
    ARROW_ASSIGN_OR_RAISE(Json value, Value(0));
    Space();
    if (pos_ != text_.size()) return Fail("text after the schema");
    return value;
  }

 private:
  arrow::Status Fail(const std::string& why) const {
    return Error(ErrorKind::kInvalidData, "its schemaString is not a JSON schema (" + why + " at " +
                                              std::to_string(pos_) + ")");
  }
  void Space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    Space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  arrow::Result<Json> Value(int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than " + std::to_string(kMaxDepth));
    Space();
    if (pos_ >= text_.size()) return Fail("an unexpected end");
    Json out;
    const char c = text_[pos_];
    if (c == '"') {
      out.kind = Json::kString;
      ARROW_ASSIGN_OR_RAISE(out.text, String());
    } else if (c == '{') {
      ++pos_;
      out.kind = Json::kObject;
      if (Eat('}')) return out;
      do {
        Space();
        if (pos_ >= text_.size() || text_[pos_] != '"') return Fail("an object key expected");
        ARROW_ASSIGN_OR_RAISE(std::string key, String());
        if (!Eat(':')) return Fail("':' expected");
        ARROW_ASSIGN_OR_RAISE(Json value, Value(depth + 1));
        out.keys.push_back(std::move(key));
        out.values.push_back(std::move(value));
      } while (Eat(','));
      if (!Eat('}')) return Fail("'}' expected");
    } else if (c == '[') {
      ++pos_;
      out.kind = Json::kArray;
      if (Eat(']')) return out;
      do {
        ARROW_ASSIGN_OR_RAISE(Json value, Value(depth + 1));
        out.items.push_back(std::move(value));
      } while (Eat(','));
      if (!Eat(']')) return Fail("']' expected");
    } else {
      // A number, true, false or null: its characters, checked loosely.
      const size_t start = pos_;
      while (pos_ < text_.size() && std::string_view("+-.0123456789eEtrufalsn").find(text_[pos_]) !=
                                        std::string_view::npos) {
        ++pos_;
      }
      if (pos_ == start) return Fail(std::string("an unexpected '") + c + "'");
      out.text = std::string(text_.substr(start, pos_ - start));
    }
    return out;
  }

  static void Utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  arrow::Result<uint32_t> Hex4() {
    if (text_.size() - pos_ < 4) return Fail("a short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return Fail("a bad \\u escape");
      }
    }
    return v;
  }

  arrow::Result<std::string> String() {
    ++pos_;  // the opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      const char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          ARROW_ASSIGN_OR_RAISE(uint32_t cp, Hex4());
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            ARROW_ASSIGN_OR_RAISE(const uint32_t low, Hex4());
            if (low < 0xDC00 || low >= 0xE000) return Fail("a lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xD800 && cp < 0xE000) {
            return Fail("a lone surrogate");
          }
          Utf8(cp, &out);
          break;
        }
        default:
          return Fail(std::string("a bad escape '\\") + e + "'");
      }
    }
    if (pos_ >= text_.size()) return Fail("an unterminated string");
    ++pos_;  // the closing quote
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

arrow::Status Bad(const std::string& why) {
  return Error(ErrorKind::kInvalidData, "its schemaString " + why);
}

// The fields of a struct type `type` (and of structs in its arrays and maps)
// below the field whose physical path is `parent` ("" at the top).
arrow::Status Walk(const Json& type, const std::string& parent, int depth, ColumnMapping* out) {
  if (depth > kMaxDepth) return Bad("nests deeper than " + std::to_string(kMaxDepth));
  if (type.kind != Json::kObject) return arrow::Status::OK();  // a primitive: "long"
  const Json* kind = type.Get("type");
  if (!kind || kind->kind != Json::kString) return Bad("has a type without its kind");
  if (kind->text == "array") {
    const Json* element = type.Get("elementType");
    return element ? Walk(*element, parent, depth + 1, out) : arrow::Status::OK();
  }
  if (kind->text == "map") {
    // A map's flattened fields are "m.key..." and "m.value...": each a step.
    for (const auto& [part, step] :
         {std::pair("keyType", "key"), std::pair("valueType", "value")}) {
      if (const Json* t = type.Get(part)) {
        ARROW_RETURN_NOT_OK(
            Walk(*t, std::string(parent).append(1, kPathSeparator).append(step), depth + 1, out));
      }
    }
    return arrow::Status::OK();
  }
  if (kind->text != "struct") return arrow::Status::OK();
  const Json* fields = type.Get("fields");
  if (!fields || fields->kind != Json::kArray) return Bad("has a struct without its fields");
  std::set<std::string> seen;
  for (const Json& field : fields->items) {
    const Json* name = field.Get("name");
    const Json* metadata = field.Get("metadata");
    const Json* physical = metadata ? metadata->Get("delta.columnMapping.physicalName") : nullptr;
    if (!name || name->kind != Json::kString) return Bad("has a field without a name");
    if (!physical || physical->kind != Json::kString || physical->text.empty()) {
      return Bad("has the field '" + name->text + "' without a delta.columnMapping.physicalName");
    }
    if (!seen.insert(physical->text).second) {
      return Bad("names the physical column '" + physical->text + "' twice in one struct");
    }
    const std::string path =
        parent.empty() ? physical->text
                       : std::string(parent).append(1, kPathSeparator).append(physical->text);
    out->display.emplace(path, name->text);
    if (parent.empty()) out->top_level.insert(physical->text);
    if (const Json* inner = field.Get("type")) {
      ARROW_RETURN_NOT_OK(Walk(*inner, path, depth + 1, out));
    }
  }
  return arrow::Status::OK();
}

// The number in `text`, spaces around it allowed; nullopt for anything else, an overflow too.
std::optional<int> SmallNumber(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// decimal(p,s) with 1 <= p <= 38 and 0 <= s <= p (spaces allowed, though Spark writes none).
std::shared_ptr<arrow::DataType> DecimalType(std::string_view name) {
  constexpr std::string_view kOpen = "decimal(";
  if (!name.starts_with(kOpen) || !name.ends_with(')')) return nullptr;
  const std::string_view inner = name.substr(kOpen.size(), name.size() - kOpen.size() - 1);
  const size_t comma = inner.find(',');
  if (comma == std::string_view::npos) return nullptr;
  const auto precision = SmallNumber(inner.substr(0, comma));
  const auto scale = SmallNumber(inner.substr(comma + 1));
  if (!precision || !scale || *precision < 1 || *precision > 38 || *scale < 0 ||
      *scale > *precision) {
    return nullptr;
  }
  return arrow::decimal128(*precision, *scale);
}

// The Arrow type of a Delta primitive type's name; null for another.
std::shared_ptr<arrow::DataType> PrimitiveType(const std::string& name) {
  static const std::map<std::string, std::shared_ptr<arrow::DataType>> kTypes = {
      {"boolean", arrow::boolean()},
      {"byte", arrow::int8()},
      {"short", arrow::int16()},
      {"integer", arrow::int32()},
      {"long", arrow::int64()},
      {"float", arrow::float32()},
      {"double", arrow::float64()},
      {"string", arrow::utf8()},
      {"binary", arrow::binary()},
      {"date", arrow::date32()},
      {"timestamp", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")},
      {"timestamp_ntz", arrow::timestamp(arrow::TimeUnit::MICRO)},
  };
  if (const auto it = kTypes.find(name); it != kTypes.end()) return it->second;
  return DecimalType(name);
}

}  // namespace

arrow::Result<arrow::FieldVector> PrimitiveColumns(std::string_view schema_string,
                                                   const std::vector<std::string>& skip) {
  ARROW_ASSIGN_OR_RAISE(const Json schema, Parser(schema_string).Document());
  const Json* fields = schema.Get("fields");
  if (!fields || fields->kind != Json::kArray) return Bad("has no fields");
  arrow::FieldVector out;
  for (const Json& field : fields->items) {
    const Json* name = field.Get("name");
    const Json* type = field.Get("type");
    if (!name || name->kind != Json::kString) return Bad("has a field without a name");
    if (std::find(skip.begin(), skip.end(), name->text) != skip.end()) continue;
    if (!type || type->kind != Json::kString) continue;  // a struct, array or map
    if (auto arrow_type = PrimitiveType(type->text)) {
      out.push_back(arrow::field(name->text, std::move(arrow_type)));
    }
  }
  return out;
}

arrow::Result<ColumnMapping> ParseColumnMapping(std::string_view schema_string) {
  ARROW_ASSIGN_OR_RAISE(const Json schema, Parser(schema_string).Document());
  ColumnMapping mapping;
  ARROW_RETURN_NOT_OK(Walk(schema, "", 0, &mapping));
  if (mapping.top_level.empty()) return Bad("has no columns");
  return mapping;
}

std::optional<std::string> DisplayName(const ColumnMapping& mapping, const std::string& flat) {
  std::string out;
  std::string path;  // the physical path of the last component the schema named
  size_t start = 0;
  while (start <= flat.size()) {
    const size_t dot = std::min(flat.find('.', start), flat.size());
    const std::string part = flat.substr(start, dot - start);
    if (start == 0 && !mapping.top_level.count(part)) return std::nullopt;
    std::string key = path.empty() ? part : std::string(path).append(1, kPathSeparator) + part;
    const auto it = mapping.display.find(key);
    if (start > 0) out += '.';
    // A name the schema does not give (a map's "key" and "value") is kept as
    // it is, and is a step of the path: a map's key and value structs lie
    // below it.  (A list of structs adds no name: "items.price".)
    out += it == mapping.display.end() ? part : it->second;
    path = std::move(key);
    start = dot + 1;
  }
  return out;
}

}  // namespace shardfeed
