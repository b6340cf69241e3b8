#include "policy_report.hpp"

#include "table.hpp"
#include "text_format.hpp"

namespace redlimit_cli {
namespace {

void write_change(JsonWriter& json, std::int64_t version, std::int64_t since_us) {
  json.key("version").integer(version);
  json.key("since").string(format_utc(since_us));
  json.key("since_us").integer(since_us);
}

}  // namespace

std::string stored_policies_text(const std::string& name, const redlimit::StoredPolicies& stored) {
  std::vector<std::pair<std::string, std::string>> fields{{"name", printable(name)}};
  if (stored.policy) {
    const redlimit::PolicyRecord& record = *stored.policy;
    fields.emplace_back("policy", redlimit::to_string(record.policy));
    fields.emplace_back("version", std::to_string(record.version));
    fields.emplace_back("since", format_utc(record.since_us));
    fields.emplace_back("carry", std::string(carry_name(record.carry)));
  } else {
    fields.emplace_back("policy", "none");
  }
  fields.emplace_back("overrides",
                      stored.overrides.empty() ? "none" : std::to_string(stored.overrides.size()));
  std::string out = render_fields(fields);
  if (stored.overrides.empty()) return out;
  Table overrides({{"KEY"}, {"POLICY"}, {"VERSION", true}, {"SINCE"}});
  for (const auto& [key, record] : stored.overrides) {
    overrides.add_row({printable(key), redlimit::to_string(record.policy),
                       std::to_string(record.version), format_utc(record.since_us)});
  }
  return out + "\n" + overrides.render();
}

void write_stored_policies(JsonWriter& json, const std::string& name,
                           const redlimit::StoredPolicies& stored) {
  json.begin_object();
  json.key("name").string(name);
  json.key("version").integer(stored.version);
  json.key("policy");
  if (stored.policy) {
    json.begin_object();
    json.key("text").string(redlimit::to_string(stored.policy->policy));
    write_change(json, stored.policy->version, stored.policy->since_us);
    json.key("carry").string(carry_name(stored.policy->carry));
    json.end_object();
  } else {
    json.null();
  }
  json.key("overrides").begin_array();
  for (const auto& [key, record] : stored.overrides) {
    json.begin_object();
    json.key("key").string(key);
    json.key("policy").string(redlimit::to_string(record.policy));
    write_change(json, record.version, record.since_us);
    json.end_object();
  }
  json.end_array();
  json.key("removed_overrides").begin_array();
  for (const auto& [key, removal] : stored.removed_overrides) {
    json.begin_object();
    json.key("key").string(key);
    write_change(json, removal.version, removal.since_us);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

}  // namespace redlimit_cli
