#pragma once
// A small JSON writer: one document built into a string, for the --json output.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlimit_cli {

/// Builds one JSON document (RFC 8259) in order: commas and nesting are tracked, strings are
/// escaped. `JsonWriter().begin_object().key("n").integer(1).end_object().str()` is `{"n":1}`.
/// Misuse (a value where a key is due, unbalanced ends) is a programming error, not checked.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  /// The name of the next member of the object being written.
  JsonWriter& key(std::string_view name);
  /// A string. Quotes, backslashes and control characters are escaped; a byte that is not part
  /// of valid UTF-8 becomes U+FFFD (the document stays valid UTF-8).
  JsonWriter& string(std::string_view text);
  JsonWriter& integer(std::int64_t number);
  /// A number in its shortest exact form; null when it is not finite (JSON has no NaN).
  JsonWriter& real(double number);
  JsonWriter& boolean(bool value);
  JsonWriter& null();
  /// The document written so far.
  const std::string& str() const noexcept { return out_; }

 private:
  /// Writes the comma a value needs before it, unless it follows a key.
  void separate();
  void open(char bracket);
  void close(char bracket);

  std::string out_;
  /// Per open object or array: whether it has an element yet.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace redlimit_cli
