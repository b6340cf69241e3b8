#pragma once
// For the tests: reading the JSON the command prints back into values, strictly (RFC 8259), so
// that a test both checks the document is valid and looks into it.

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace redlimit_cli::test {

/// One JSON value.
struct JsonValue {
  using Array = std::vector<JsonValue>;
  using Object = std::map<std::string, JsonValue>;
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> value;

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(value); }
  bool boolean() const { return std::get<bool>(value); }
  double number() const { return std::get<double>(value); }
  const std::string& string() const { return std::get<std::string>(value); }
  const Array& array() const { return std::get<Array>(value); }
  const Object& object() const { return std::get<Object>(value); }
  /// The member `name` of an object; throws std::out_of_range if it has none.
  const JsonValue& operator[](const std::string& name) const { return object().at(name); }
  /// The element `index` of an array.
  const JsonValue& operator[](std::size_t index) const { return array().at(index); }
};

/// Parses one JSON document (surrounding whitespace allowed); throws std::runtime_error naming
/// the offset of the first thing that is not JSON.
JsonValue parse_json(std::string_view text);

}  // namespace redlimit_cli::test
