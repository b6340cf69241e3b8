#include "descriptor_match.hpp"

#include <algorithm>
#include <set>

namespace redlimit_server {
namespace {

/// The node of `level` that `entry` leads to, or null.
const DescriptorNode* next_node(const DescriptorNode& level, const DescriptorEntry& entry) {
  const std::string with_value = entry.key + "_" + entry.value;
  if (const auto it = level.children.find(with_value); it != level.children.end())
    return &it->second;
  for (const std::string& wildcard : level.wildcard_keys) {
    const std::string_view prefix = std::string_view(wildcard).substr(0, wildcard.size() - 1);
    if (std::string_view(with_value).starts_with(prefix))
      return &level.children.find(wildcard)->second;
  }
  if (const auto it = level.children.find(entry.key); it != level.children.end())
    return &it->second;
  return nullptr;
}

}  // namespace

std::optional<MatchedLimit> match_limit(const RateLimitConfig& config, std::string_view domain,
                                        std::span<const DescriptorEntry> entries) {
  const auto found = config.domains.find(domain);
  if (found == config.domains.end()) return std::nullopt;
  const DescriptorNode* level = &found->second.root;
  std::optional<MatchedLimit> matched;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const DescriptorNode* node = next_node(*level, entries[i]);
    if (node != nullptr && node->limit && i + 1 == entries.size())
      matched = MatchedLimit{&*node->limit};
    if (node == nullptr || node->children.empty()) break;
    level = node;
  }
  return matched;
}

void apply_replaces(std::vector<std::optional<MatchedLimit>>& matched) {
  std::set<std::string, std::less<>> replaced;
  for (const auto& limit : matched) {
    if (limit) replaced.insert(limit->limit->replaces.begin(), limit->limit->replaces.end());
  }
  // Why never an unlimited one: envoyproxy/ratelimit answers it as unlimited, replaced or not.
  for (auto& limit : matched) {
    if (limit && !limit->limit->unlimited && !limit->limit->name.empty() &&
        replaced.contains(limit->limit->name))
      limit.reset();
  }
}

}  // namespace redlimit_server
