#pragma once
/// @file reply.hpp
/// A Redis reply, as owned C++ values.

#include <cstdint>
#include <string>
#include <vector>

namespace redlimit {

/// One Redis reply (RESP2). A top-level error reply is raised as an exception by Client and
/// never appears here; errors nested in an array (a script's table) appear as Type::error.
struct Reply {
  enum class Type { nil, integer, string, status, array, error };

  Type type = Type::nil;
  std::int64_t integer = 0;     ///< Type::integer
  std::string str;              ///< Type::string, Type::status, Type::error
  std::vector<Reply> elements;  ///< Type::array

  bool is_nil() const noexcept { return type == Type::nil; }
  /// The integer; throws ProtocolError if this is not an integer reply.
  std::int64_t as_integer() const;
  /// The text of a string or status reply; throws ProtocolError otherwise.
  const std::string& as_string() const;
  /// The elements of an array reply; throws ProtocolError otherwise.
  const std::vector<Reply>& as_array() const;
};

}  // namespace redlimit
