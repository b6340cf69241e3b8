#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace redlimit::test {

/// The least-privilege user for the default prefix "rl". docs/operations.md quotes this line
/// verbatim (tests/redis/acl_test.cpp checks it): change both together. The password is the
/// placeholder the guide says to replace.
inline constexpr std::string_view acl_setuser =
    "ACL SETUSER redlimit reset on >change-me ~rl:* resetchannels &rl:* "
    "+ping +evalsha +eval +del +subscribe +unsubscribe "
    "+time +get +set +pexpire +pttl +zadd +zcount +zrange +zrangebyscore +zremrangebyscore "
    "+zremrangebyrank +zscore +zrem +hget +hset +hdel +hincrby +publish";

/// What a limiter that follows stored policies (Limiter(client, options)) needs on top of
/// acl_setuser: the policy store script's read. docs/operations.md names it.
inline constexpr std::string_view acl_follow_rules = "+hgetall";
/// What a process that changes stored policies (PolicyStore's writes) needs on top of both:
/// try_set()'s check (the other writes' commands are in acl_setuser).
inline constexpr std::string_view acl_change_rules = "+hexists";

/// What a Redis Cluster needs on top of acl_setuser, on every node.
inline constexpr std::string_view acl_cluster_rules = "+cluster|slots +asking";

/// The words of `text` split at whitespace: an ACL line or a command list as argv.
inline std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

}  // namespace redlimit::test
