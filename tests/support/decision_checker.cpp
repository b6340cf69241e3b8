#include "support/decision_checker.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace redlimit::test {
namespace {

__extension__ typedef __int128 Int128;

std::int64_t capacity(const Limit& limit) {
  return limit.burst != 0 ? limit.burst : limit.rate.permits;
}

CheckResult violation(std::int64_t start, std::int64_t end, std::int64_t admitted,
                      std::int64_t allowed, const std::string& what) {
  CheckResult result;
  result.ok = false;
  result.window_start_us = start;
  result.window_end_us = end;
  result.admitted = admitted;
  result.allowed = allowed;
  result.description = what + ": " + std::to_string(admitted) + " permits admitted in [" +
                       std::to_string(start) + ", " + std::to_string(end) + "] us, at most " +
                       std::to_string(allowed) + " allowed";
  return result;
}

/// Rightmost index i in [0, j] with value[i] < bound, or -1 (a min segment tree).
class RightmostBelow {
 public:
  explicit RightmostBelow(const std::vector<Int128>& values) : size_(1) {
    while (size_ < values.size())
      size_ *= 2;
    tree_.assign(2 * size_, std::numeric_limits<Int128>::max());
    for (std::size_t i = 0; i < values.size(); ++i)
      tree_[size_ + i] = values[i];
    for (std::size_t i = size_ - 1; i > 0; --i)
      tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }
  long find(std::size_t j, Int128 bound) const { return find(1, 0, size_ - 1, j, bound); }

 private:
  long find(std::size_t node, std::size_t low, std::size_t high, std::size_t j,
            Int128 bound) const {
    if (low > j || tree_[node] >= bound) return -1;
    if (low == high) return static_cast<long>(low);
    const std::size_t middle = (low + high) / 2;
    const long right = find(2 * node + 1, middle + 1, high, j, bound);
    return right >= 0 ? right : find(2 * node, low, middle, j, bound);
  }
  std::size_t size_;
  std::vector<Int128> tree_;
};

/// gcra and token_bucket: S(i..j) * P <= B * P + (t_j - t_i) * N for all i <= j.
CheckResult check_bucket(const Limit& limit, const std::vector<Admit>& admits) {
  const Int128 n = limit.rate.permits;
  const Int128 p = limit.rate.period.count();
  const Int128 b = capacity(limit);
  // F(j) = S(0..j) P - t_j N; G(i) = S(0..i-1) P - t_i N; violation iff F(j) - G(i) > B P.
  std::vector<Int128> g(admits.size());
  std::vector<Int128> f(admits.size());
  Int128 sum = 0;
  for (std::size_t k = 0; k < admits.size(); ++k) {
    g[k] = sum * p - admits[k].time_us * n;
    sum += admits[k].permits;
    f[k] = sum * p - admits[k].time_us * n;
  }
  const RightmostBelow search(g);
  CheckResult best;
  for (std::size_t j = 0; j < admits.size(); ++j) {
    const long i = search.find(j, f[j] - b * p);
    if (i < 0) continue;
    const std::int64_t start = admits[static_cast<std::size_t>(i)].time_us;
    const std::int64_t end = admits[j].time_us;
    if (best.ok || end - start < best.window_end_us - best.window_start_us) {
      std::int64_t admitted = 0;
      for (long k = i; k <= static_cast<long>(j); ++k)
        admitted += admits[static_cast<std::size_t>(k)].permits;
      const auto allowed = static_cast<std::int64_t>(b + (Int128(end - start) * n) / p);
      best = violation(start, end, admitted, allowed, "burst + rate x elapsed exceeded");
    }
  }
  return best;
}

/// leaky_bucket: (t_{k+1} - t_k) * N >= n_k * P.
CheckResult check_spacing(const Limit& limit, const std::vector<Admit>& admits) {
  const Int128 n = limit.rate.permits;
  const Int128 p = limit.rate.period.count();
  CheckResult best;
  for (std::size_t k = 0; k + 1 < admits.size(); ++k) {
    const std::int64_t gap = admits[k + 1].time_us - admits[k].time_us;
    if (Int128(gap) * n >= Int128(admits[k].permits) * p) continue;
    if (best.ok || gap < best.window_end_us - best.window_start_us) {
      best = violation(admits[k].time_us, admits[k + 1].time_us,
                       admits[k].permits + admits[k + 1].permits, admits[k].permits,
                       "departures closer than permits x period / rate");
    }
  }
  return best;
}

/// Sums per window; `window_of` maps an admit index to its window start.
template <class WindowOf>
CheckResult check_windows(const Limit& limit, const std::vector<Admit>& admits, WindowOf window_of,
                          const char* what) {
  std::map<std::int64_t, std::int64_t> sums;
  for (std::size_t k = 0; k < admits.size(); ++k)
    sums[window_of(k)] += admits[k].permits;
  for (const auto& [start, sum] : sums) {
    if (sum > limit.rate.permits) {
      return violation(start, start + limit.rate.period.count() - 1, sum, limit.rate.permits, what);
    }
  }
  return {};
}

std::int64_t aligned_start(std::int64_t t, std::int64_t period) {
  return t - t % period;
}

CheckResult check_fixed_window(const Limit& limit, const std::vector<Admit>& admits) {
  const std::int64_t period = limit.rate.period.count();
  if (limit.window == Window::aligned) {
    return check_windows(
        limit, admits, [&](std::size_t k) { return aligned_start(admits[k].time_us, period); },
        "permits per aligned window exceeded");
  }
  std::vector<std::int64_t> starts(admits.size());
  std::int64_t start = std::numeric_limits<std::int64_t>::min() / 2;
  for (std::size_t k = 0; k < admits.size(); ++k) {
    if (admits[k].time_us >= start + period) start = admits[k].time_us;
    starts[k] = start;
  }
  return check_windows(
      limit, admits, [&](std::size_t k) { return starts[k]; },
      "permits per anchored window exceeded");
}

CheckResult check_sliding_log(const Limit& limit, const std::vector<Admit>& admits) {
  const std::int64_t window = limit.rate.period.count();
  std::size_t first = 0;
  std::int64_t inside = 0;
  for (std::size_t j = 0; j < admits.size(); ++j) {
    inside += admits[j].permits;
    // Admits at the same time as j all belong to its window: include them before checking.
    if (j + 1 < admits.size() && admits[j + 1].time_us == admits[j].time_us) continue;
    while (admits[first].time_us <= admits[j].time_us - window)
      inside -= admits[first++].permits;
    if (inside > limit.rate.permits) {
      return violation(admits[j].time_us - window + 1, admits[j].time_us, inside,
                       limit.rate.permits, "permits in a trailing window exceeded");
    }
  }
  return {};
}

CheckResult check_sliding_counter(const Limit& limit, const std::vector<Admit>& admits) {
  const std::int64_t period = limit.rate.period.count();
  if (CheckResult per_window = check_windows(
          limit, admits, [&](std::size_t k) { return aligned_start(admits[k].time_us, period); },
          "permits per aligned window exceeded");
      !per_window) {
    return per_window;
  }
  std::map<std::int64_t, std::int64_t> totals;
  for (const Admit& admit : admits)
    totals[aligned_start(admit.time_us, period)] += admit.permits;
  // At each admit: previous window's total, weighted, plus admits strictly earlier in this
  // window (same-microsecond admits are ordered in the system's favour), plus its own permits.
  std::int64_t window = std::numeric_limits<std::int64_t>::min();
  std::int64_t before = 0;
  std::int64_t at_same_time = 0;
  for (std::size_t k = 0; k < admits.size(); ++k) {
    const std::int64_t start = aligned_start(admits[k].time_us, period);
    if (start != window) {
      window = start;
      before = 0;
      at_same_time = 0;
    } else if (admits[k].time_us != admits[k - 1].time_us) {
      before += at_same_time;
      at_same_time = 0;
    }
    const auto previous_it = totals.find(start - period);
    const std::int64_t previous = previous_it == totals.end() ? 0 : previous_it->second;
    const std::int64_t elapsed = admits[k].time_us - start;
    const std::int64_t weighted =
        previous - static_cast<std::int64_t>(Int128(previous) * elapsed / period);
    if (weighted + before + admits[k].permits > limit.rate.permits) {
      return violation(admits[k].time_us - period + 1, admits[k].time_us,
                       weighted + before + admits[k].permits, limit.rate.permits,
                       "weighted estimate exceeded at an admit");
    }
    at_same_time += admits[k].permits;
  }
  return {};
}

}  // namespace

CheckResult check_admits(const Limit& limit, std::vector<Admit> admits) {
  std::stable_sort(admits.begin(), admits.end(),
                   [](const Admit& a, const Admit& b) { return a.time_us < b.time_us; });
  switch (limit.algorithm) {
    case Algorithm::gcra:
    case Algorithm::token_bucket:
      return check_bucket(limit, admits);
    case Algorithm::leaky_bucket:
      return check_spacing(limit, admits);
    case Algorithm::fixed_window:
      return check_fixed_window(limit, admits);
    case Algorithm::sliding_window_log:
      return check_sliding_log(limit, admits);
    case Algorithm::sliding_window_counter:
      return check_sliding_counter(limit, admits);
  }
  return {};
}

std::int64_t most_admissible(const Limit& limit, std::int64_t first_us, std::int64_t last_us) {
  const Int128 n = limit.rate.permits;
  const Int128 p = limit.rate.period.count();
  const Int128 span = last_us - first_us;
  switch (limit.algorithm) {
    case Algorithm::gcra:
    case Algorithm::token_bucket:
      return static_cast<std::int64_t>(capacity(limit) + span * n / p);
    case Algorithm::leaky_bucket:
      return static_cast<std::int64_t>(1 + span * n / p);
    case Algorithm::fixed_window:
    case Algorithm::sliding_window_log:
    case Algorithm::sliding_window_counter:
      // Every window of `period` that [first, last] touches, full.
      return static_cast<std::int64_t>((span / p + 1) * n);
  }
  return 0;
}

}  // namespace redlimit::test
