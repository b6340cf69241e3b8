#include "redlimit/reply.hpp"

#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

const char* type_name(Reply::Type type) {
  switch (type) {
    case Reply::Type::nil:
      return "nil";
    case Reply::Type::integer:
      return "integer";
    case Reply::Type::string:
      return "string";
    case Reply::Type::status:
      return "status";
    case Reply::Type::array:
      return "array";
    case Reply::Type::error:
      return "error";
  }
  return "unknown";
}

[[noreturn]] void wrong_type(const char* wanted, Reply::Type got) {
  throw ProtocolError(std::string("expected a Redis ") + wanted + " reply, got " + type_name(got));
}

}  // namespace

std::int64_t Reply::as_integer() const {
  if (type != Type::integer) wrong_type("integer", type);
  return integer;
}

const std::string& Reply::as_string() const {
  if (type != Type::string && type != Type::status) wrong_type("string", type);
  return str;
}

const std::vector<Reply>& Reply::as_array() const {
  if (type != Type::array) wrong_type("array", type);
  return elements;
}

}  // namespace redlimit
