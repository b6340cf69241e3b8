#include "policy/policy_records.hpp"

#include <array>
#include <charconv>

#include "lua_scripts.hpp"
#include "policy/key_format.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

std::int64_t parse_number(std::string_view text, std::string_view what) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw ProtocolError("the policy store holds a bad " + std::string(what) + ": '" +
                        std::string(text) + "'");
  }
  return value;
}

/// "0" as_is, "1" proportional, "2" reset: Carry's values.
Carry parse_carry(std::string_view text) {
  const std::int64_t carry = parse_number(text, "carry");
  if (carry < 0 || carry > 2) {
    throw ProtocolError("the policy store holds a bad carry: '" + std::string(text) + "'");
  }
  return static_cast<Carry>(carry);
}

Policy parse_policy(std::string_view text) {
  try {
    return Policy::parse(text);
  } catch (const InvalidArgument& e) {
    throw ProtocolError(std::string("the policy store holds a policy this release cannot read: ") +
                        e.what());
  }
}

/// "<version>:<since>", as remove_override writes it; `what` names it in errors.
OverrideRemoval parse_removal(std::string_view value, const std::string& what = "removal") {
  const auto colon = value.find(':');
  if (colon == std::string_view::npos) {
    throw ProtocolError("the policy store holds a bad " + what + ": '" + std::string(value) + "'");
  }
  return OverrideRemoval{.version = parse_number(value.substr(0, colon), what + " version"),
                         .since_us = parse_number(value.substr(colon + 1), what + " time")};
}

/// "<version>:<since>:<policy text>", as set_override writes it.
PolicyRecord parse_override(std::string_view value) {
  const auto first = value.find(':');
  const auto second = first == std::string_view::npos ? first : value.find(':', first + 1);
  if (second == std::string_view::npos) {
    throw ProtocolError("the policy store holds a bad override: '" + std::string(value) + "'");
  }
  const OverrideRemoval change = parse_removal(value.substr(0, second), "override");
  return PolicyRecord{.policy = parse_policy(value.substr(second + 1)),
                      .version = change.version,
                      .since_us = change.since_us};
}

}  // namespace

std::string policy_record_key(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + ":policy:{" + escape_key_part(name) + "}";
}

std::string policy_channel(std::string_view record_key) {
  return std::string(record_key) + ":changed";
}

Task<Reply> run_policy_script(std::shared_ptr<CommandDispatcher> redis, std::string record_key,
                              std::string operation, std::string first, std::string second,
                              std::optional<std::chrono::steady_clock::time_point> deadline) {
  const std::string overrides_key = record_key + ":overrides";
  const std::string removed_key = record_key + ":removed";
  const std::array<std::string_view, 3> keys = {record_key, overrides_key, removed_key};
  const std::array<std::string_view, 3> args = {operation, first, second};
  co_return co_await redis->eval(scripts::policy_store, keys, args,
                                 deadline.value_or(redis->command_deadline()));
}

Task<StoredPolicies> read_policies(std::shared_ptr<CommandDispatcher> redis,
                                   std::string record_key) {
  const Reply reply =
      co_await run_policy_script(std::move(redis), std::move(record_key), "read", "", "");
  const auto& parts = reply.as_array();
  if (parts.size() != 3) throw ProtocolError("the policy store's read returned a bad reply");
  StoredPolicies stored;
  const auto& fields = parts[0].as_array();
  std::optional<std::string> text;
  PolicyRecord record;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& field = fields[i].as_string();
    const std::string& value = fields[i + 1].as_string();
    if (field == "version") {
      stored.version = parse_number(value, "version");
    } else if (field == "policy") {
      text = value;
    } else if (field == "since") {
      record.since_us = parse_number(value, "time of change");
    } else if (field == "carry") {
      record.carry = parse_carry(value);
    } else if (field == "policy_version") {
      record.version = parse_number(value, "policy version");
    }
  }
  if (text) {
    if (record.version <= 0)
      throw ProtocolError("the policy store holds a policy without its version");
    record.policy = parse_policy(*text);
    stored.policy = std::move(record);
  }
  const auto parse_pairs = [](const Reply& part, auto& into, auto parse) {
    const auto& pairs = part.as_array();
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2)
      into.emplace(pairs[i].as_string(), parse(pairs[i + 1].as_string()));
  };
  parse_pairs(parts[1], stored.overrides, parse_override);
  parse_pairs(parts[2], stored.removed_overrides,
              [](std::string_view value) { return parse_removal(value); });
  co_return stored;
}

Task<Advanced> advance_policies(std::shared_ptr<CommandDispatcher> redis, std::string record_key,
                                std::string key, std::int64_t floor,
                                std::chrono::steady_clock::time_point deadline) {
  const Reply reply = co_await run_policy_script(std::move(redis), std::move(record_key), "advance",
                                                 std::to_string(floor), std::move(key), deadline);
  const auto& parts = reply.as_array();
  if (parts.size() != 3) throw ProtocolError("the policy store's advance returned a bad reply");
  co_return Advanced{.done = parts[0].as_integer() == 1, .version = parts[1].as_integer()};
}

}  // namespace redlimit::detail
