#include "json_reader.hpp"

#include <charconv>
#include <stdexcept>

namespace redlimit_cli::test {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  JsonValue document() {
    JsonValue value = parse_value();
    skip_space();
    if (at_ < text_.size()) fail("text after the document");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("not JSON at offset " + std::to_string(at_) + ": " + what);
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t'))
      ++at_;
  }
  char peek() {
    skip_space();
    if (at_ == text_.size()) fail("unexpected end");
    return text_[at_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  bool take_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  JsonValue parse_value() {
    const char c = peek();
    if (c == '{') return {parse_object()};
    if (c == '[') return {parse_array()};
    if (c == '"') return {parse_string()};
    if (take_word("null")) return {nullptr};
    if (take_word("true")) return {true};
    if (take_word("false")) return {false};
    return {parse_number()};
  }

  JsonValue::Object parse_object() {
    expect('{');
    JsonValue::Object object;
    if (peek() == '}') {
      ++at_;
      return object;
    }
    for (;;) {
      if (peek() != '"') fail("expected a member name");
      std::string name = parse_string();
      expect(':');
      if (!object.emplace(std::move(name), parse_value()).second) fail("a repeated member");
      if (peek() == '}') {
        ++at_;
        return object;
      }
      expect(',');
    }
  }

  JsonValue::Array parse_array() {
    expect('[');
    JsonValue::Array array;
    if (peek() == ']') {
      ++at_;
      return array;
    }
    for (;;) {
      array.push_back(parse_value());
      if (peek() == ']') {
        ++at_;
        return array;
      }
      expect(',');
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (at_ < text_.size() && text_[at_] != '"') {
      const auto c = static_cast<unsigned char>(text_[at_++]);
      if (c < 0x20) fail("a raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (at_ == text_.size()) fail("unexpected end");
      const char escape = text_[at_++];
      switch (escape) {
        case '"':
        case '\\':
        case '/':
          out += escape;
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
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u':
          append_utf8(out, parse_hex4());
          break;
        default:
          fail("an unknown escape");
      }
    }
    if (at_ == text_.size()) fail("an unterminated string");
    ++at_;
    return out;
  }

  unsigned parse_hex4() {
    if (at_ + 4 > text_.size()) fail("a cut \\u escape");
    unsigned code = 0;
    const auto [end, ec] = std::from_chars(text_.data() + at_, text_.data() + at_ + 4, code, 16);
    if (ec != std::errc{} || end != text_.data() + at_ + 4) fail("a bad \\u escape");
    at_ += 4;
    if (code >= 0xD800 && code <= 0xDFFF) fail("a surrogate (the writer never makes one)");
    return code;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  double parse_number() {
    skip_space();
    const std::size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    if (at_ == text_.size() || text_[at_] < '0' || text_[at_] > '9') fail("expected a value");
    if (text_[at_] == '0' && at_ + 1 < text_.size() && text_[at_ + 1] >= '0' &&
        text_[at_ + 1] <= '9')
      fail("a leading zero");
    double number = 0;
    const auto [end, ec] =
        std::from_chars(text_.data() + start, text_.data() + text_.size(), number);
    if (ec != std::errc{}) fail("a bad number");
    at_ = static_cast<std::size_t>(end - text_.data());
    return number;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text) {
  return Parser(text).document();
}

}  // namespace redlimit_cli::test
