#include "key_sample.hpp"

#include <set>

#include "redlimit/redis_keys.hpp"

namespace redlimit_cli {
namespace {

/// The COUNT of each SCAN call: the Redis keys it examines.
constexpr std::size_t scan_count = 1000;

}  // namespace

redlimit::Task<KeySample> sample_keys(redlimit::Client& client, std::string prefix,
                                      std::string name, SampleBounds bounds, std::stop_token stop) {
  const std::string pattern = redlimit::state_keys_pattern(prefix, name);
  KeySample sample;
  // Why sets: a key has one Redis key per limit of its policy, and SCAN may return a key twice.
  std::set<std::string> keys;
  std::set<std::string> digests;
  bool full = false;
  std::size_t examined = 0;
  std::string cursor = "0";
  for (;;) {
    const redlimit::Reply reply = co_await client.command("SCAN", cursor, "MATCH", pattern, "COUNT",
                                                          std::to_string(scan_count));
    examined += scan_count;
    const auto& parts = reply.as_array();
    cursor = parts.at(0).as_string();
    for (const redlimit::Reply& found : parts.at(1).as_array()) {
      redlimit::StateKey key = redlimit::parse_state_key(found.as_string(), prefix, name);
      if (key.kind == redlimit::StateKey::Kind::digest) digests.insert(std::move(key.key));
      if (key.kind != redlimit::StateKey::Kind::key || keys.contains(key.key)) continue;
      if (keys.size() == bounds.keys) {
        full = true;
        continue;
      }
      keys.insert(key.key);
      sample.keys.push_back(std::move(key.key));
    }
    if (cursor == "0" || full || keys.size() == bounds.keys || examined >= bounds.examined) break;
    if (stop.stop_requested()) {
      sample.interrupted = true;
      break;
    }
  }
  sample.digests = digests.size();
  sample.complete = cursor == "0" && !full;
  co_return sample;
}

}  // namespace redlimit_cli
