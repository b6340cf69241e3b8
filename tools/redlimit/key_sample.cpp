#include "key_sample.hpp"

#include <set>

#include "key_names.hpp"

namespace redlimit_cli {

redlimit::Task<KeySample> sample_keys(redlimit::Client& client, std::string prefix,
                                      std::string name, std::size_t limit, std::stop_token stop) {
  const std::string pattern = limiter_keys_pattern(prefix, name);
  KeySample sample;
  // Why sets: a key has one Redis key per limit of its policy, and SCAN may return a key twice.
  std::set<std::string> keys;
  std::set<std::string> digests;
  bool full = false;
  std::string cursor = "0";
  do {
    const redlimit::Reply reply =
        co_await client.command("SCAN", cursor, "MATCH", pattern, "COUNT", "1000");
    const auto& parts = reply.as_array();
    cursor = parts.at(0).as_string();
    for (const redlimit::Reply& found : parts.at(1).as_array()) {
      LimiterKey key = parse_limiter_key(found.as_string(), prefix, name);
      if (key.kind == LimiterKey::Kind::digest) digests.insert(std::move(key.key));
      if (key.kind != LimiterKey::Kind::key || keys.contains(key.key)) continue;
      if (keys.size() == limit) {
        full = true;
        continue;
      }
      keys.insert(key.key);
      sample.keys.push_back(std::move(key.key));
    }
  } while (cursor != "0" && !full && keys.size() < limit && !stop.stop_requested());
  sample.digests = digests.size();
  sample.complete = cursor == "0" && !full;
  co_return sample;
}

}  // namespace redlimit_cli
