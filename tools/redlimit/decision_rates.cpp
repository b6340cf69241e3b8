#include "decision_rates.hpp"

namespace redlimit_cli {
namespace {

std::optional<double> percent(double part, double whole) {
  if (whole <= 0) return std::nullopt;
  return 100.0 * part / whole;
}

}  // namespace

std::vector<LimiterActivity> activity_between(const CountsByName& before, const CountsByName& after,
                                              double seconds) {
  std::vector<LimiterActivity> rows;
  for (const auto& [name, now] : after) {
    LimiterActivity row{.name = name, .totals = now, .rates = std::nullopt};
    const auto earlier = before.find(name);
    const DecisionCounts then = earlier == before.end() ? DecisionCounts{} : earlier->second;
    const DecisionCounts delta{.allowed = now.allowed - then.allowed,
                               .denied = now.denied - then.denied,
                               .shadow_denied = now.shadow_denied - then.shadow_denied,
                               .failure_policy = now.failure_policy - then.failure_policy};
    const bool went_back = delta.allowed < 0 || delta.denied < 0 || delta.shadow_denied < 0 ||
                           delta.failure_policy < 0;
    if (!went_back && seconds > 0) {
      const auto decisions = static_cast<double>(delta.allowed + delta.denied);
      row.rates =
          DecisionRates{.decisions = decisions / seconds,
                        .denied = static_cast<double>(delta.denied) / seconds,
                        .shadow_denied = static_cast<double>(delta.shadow_denied) / seconds,
                        .failure_policy = static_cast<double>(delta.failure_policy) / seconds,
                        .denied_percent = percent(static_cast<double>(delta.denied), decisions)};
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

LimiterActivity total_of(const std::vector<LimiterActivity>& rows) {
  LimiterActivity total{.name = "(all)", .totals = {}, .rates = std::nullopt};
  // Why zeros for no rows: nothing was decided, which is a rate of 0.
  if (rows.empty()) total.rates = DecisionRates{};
  for (const LimiterActivity& row : rows) {
    total.totals.allowed += row.totals.allowed;
    total.totals.denied += row.totals.denied;
    total.totals.shadow_denied += row.totals.shadow_denied;
    total.totals.failure_policy += row.totals.failure_policy;
    if (!row.rates) continue;
    if (!total.rates) total.rates = DecisionRates{};
    total.rates->decisions += row.rates->decisions;
    total.rates->denied += row.rates->denied;
    total.rates->shadow_denied += row.rates->shadow_denied;
    total.rates->failure_policy += row.rates->failure_policy;
  }
  if (total.rates)
    total.rates->denied_percent = percent(total.rates->denied, total.rates->decisions);
  return total;
}

}  // namespace redlimit_cli
