#include "support/decision_checker.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

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

/// Floor of a / b for b > 0, also for a negative a (a debt).
Int128 floor_div(Int128 a, Int128 b) {
  Int128 quotient = a / b;
  if (a % b != 0 && a < 0) --quotient;
  return quotient;
}

Int128 ceil_div(Int128 a, Int128 b) {
  return -floor_div(-a, b);
}

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t always = std::numeric_limits<std::int64_t>::min();

bool earlier(const VersionedAdmit& a, const VersionedAdmit& b) {
  return a.time_us != b.time_us ? a.time_us < b.time_us : a.policy_version < b.policy_version;
}

/// Two limits keep one state (one key) only when they are the same algorithm and window kind.
bool same_state(const Limit& a, const Limit& b) {
  return a.algorithm == b.algorithm &&
         (a.algorithm != Algorithm::fixed_window || a.window == b.window);
}

/// A position's state at the end of a version, in that version's terms: the least the
/// implementation can hold then (more admitted, or fewer permits, only makes it stricter).
struct StateAtChange {
  Int128 available = 0;                ///< buckets: permits available x available_per
  Int128 available_per = 1;            ///< its denominator (the old period: exact, no rounding)
  std::int64_t window_start = 0;       ///< windows: the window holding the change
  Int128 count = 0;                    ///< its count
  Int128 previous = 0;                 ///< sliding_window_counter: the window before it
  std::int64_t log_cutoff = always;    ///< sliding_window_log: entries at or before it may be gone
  std::int64_t log_first_version = 0;  ///< entries of older versions are in another key
};

/// One version at one limit position: what it checks and what it starts from.
struct Era {
  const Limit& limit;
  std::int64_t version;
  std::int64_t since;
  std::int64_t end;  ///< the next version's since, or never
  Carry carry;
  const Limit* before;  ///< the previous version's limit when it kept the same state, else null
  std::vector<VersionedAdmit> counted;  ///< admitted under this version, or newer before `end`
  std::string name;                     ///< "version v, limit #p"
};

/// The denominator of the permits a bucket carries from one version to the next.
constexpr Int128 permit_fraction = 1'000'000;

/// A number of permits as a fraction: permits / per.
struct Permits {
  Int128 permits;
  Int128 per;
};

/// The permits a bucket holds at since, exactly (no rounding: an implementation that rounds
/// down, as the contract says, is stricter).
Permits carry_permits(const Era& era, const StateAtChange& from) {
  const Permits full{capacity(era.limit), 1};
  if (era.before == nullptr) return full;
  switch (era.carry) {
    case Carry::as_is:
      return from.available >= full.permits * from.available_per
                 ? full
                 : Permits{from.available, from.available_per};
    case Carry::proportional:
      return {from.available * full.permits, from.available_per * capacity(*era.before)};
    case Carry::reset:
      return full;
  }
  return full;
}

Int128 carry_count(const Era& era, Int128 count) {
  if (era.before == nullptr) return 0;
  switch (era.carry) {
    case Carry::as_is:
      return count;
    case Carry::proportional:
      return ceil_div(count * era.limit.rate.permits, era.before->rate.permits);
    case Carry::reset:
      return 0;
  }
  return 0;
}

CheckResult era_violation(const Era& era, std::int64_t start, std::int64_t end, Int128 admitted,
                          Int128 allowed, const std::string& what) {
  return violation(start, end, static_cast<std::int64_t>(admitted),
                   static_cast<std::int64_t>(allowed), era.name + ": " + what);
}

/// A bucket of the version's capacity B and rate N/P holding K permits at since x: every prefix
/// from x obeys S P <= K P + (t - x) N, every span obeys S P <= B P + (t_j - t_i) N.
CheckResult bucket_era(const Era& era, const StateAtChange& from, StateAtChange& at_end) {
  const Int128 n = era.limit.rate.permits;
  const Int128 p = era.limit.rate.period.count();
  const Int128 b = capacity(era.limit);
  const Permits k = carry_permits(era, from);
  const Int128 x = era.since;
  const Int128 none = std::numeric_limits<Int128>::max();
  Int128 sum = 0;
  Int128 min_g = none;
  Int128 sum_before_min = 0;
  std::int64_t time_of_min = 0;
  Int128 sum_before_end = 0;
  Int128 min_g_before_end = none;
  for (const VersionedAdmit& admit : era.counted) {
    const Int128 g = sum * p - admit.time_us * n;
    if (g < min_g) {
      min_g = g;
      sum_before_min = sum;
      time_of_min = admit.time_us;
    }
    sum += admit.permits;
    const Int128 f = sum * p - admit.time_us * n;
    if (f - min_g > b * p) {
      return era_violation(era, time_of_min, admit.time_us, sum - sum_before_min,
                           b + (admit.time_us - time_of_min) * n / p,
                           "burst + rate x elapsed exceeded");
    }
    if (f * k.per > k.permits * p - x * n * k.per) {
      return era_violation(era, era.since, admit.time_us, sum,
                           floor_div(k.permits * p + (admit.time_us - x) * n * k.per, p * k.per),
                           "permits carried at the change + rate x elapsed since exceeded");
    }
    if (admit.time_us < era.end) {
      sum_before_end = sum;
      min_g_before_end = min_g;
    }
  }
  if (era.end != never) {
    const Int128 end = era.end;
    // The level at the end, times p * k.per.
    Int128 level =
        std::min(b * p * k.per, k.permits * p + ((end - x) * n - sum_before_end * p) * k.per);
    if (min_g_before_end != none) {
      level = std::min(level, (b * p + end * n - sum_before_end * p + min_g_before_end) * k.per);
    }
    // Why rounded up to a millionth: exact fractions would multiply their denominators at every
    // change; rounding up only makes the check more lenient, by a millionth of a permit.
    at_end.available = ceil_div(level * permit_fraction, p * k.per);
    at_end.available_per = permit_fraction;
  }
  return {};
}

std::vector<Admit> plain(const std::vector<VersionedAdmit>& admits) {
  std::vector<Admit> result;
  result.reserve(admits.size());
  for (const VersionedAdmit& admit : admits)
    result.push_back({admit.time_us, admit.permits});
  return result;
}

/// How many windows of `period` past the one holding the change the version's own admissions
/// after it reached: they move the stored window on, and the one before it is then forgotten.
std::int64_t windows_moved_on(const Era& era, std::int64_t period) {
  std::int64_t moved = 0;
  for (const VersionedAdmit& admit : era.counted) {
    if (admit.time_us >= era.end) {
      moved = std::max(
          moved, (aligned_start(admit.time_us, period) - aligned_start(era.end, period)) / period);
    }
  }
  return moved;
}

/// Aligned windows of the version; the window holding since starts with the carried count.
CheckResult fixed_window_era(const Era& era, const StateAtChange& from, StateAtChange& at_end) {
  const std::int64_t period = era.limit.rate.period.count();
  if (era.limit.window == Window::anchored) {
    // Why: after a carried change the anchored windows start where denied requests (absent
    // from the log) converted the state; only a version that started afresh is rebuilt.
    return era.before == nullptr ? check_fixed_window(era.limit, plain(era.counted))
                                 : CheckResult{};
  }
  const std::int64_t first = aligned_start(era.since, period);
  const Int128 carried = carry_count(era, from.count);
  std::map<std::int64_t, Int128> sums;  // admitted per window
  std::map<std::int64_t, Int128> sums_before_end;
  sums_before_end[first] = carried;
  for (const VersionedAdmit& admit : era.counted) {
    const std::int64_t start = aligned_start(admit.time_us, period);
    sums[start] += admit.permits;
    if (admit.time_us < era.end) sums_before_end[start] += admit.permits;
  }
  // Why: only a window that admitted can break the limit; a carried count above a new, lower
  // limit just denies.
  for (const auto& [start, sum] : sums) {
    const Int128 counted = sum + (start == first ? carried : 0);
    if (counted > era.limit.rate.permits) {
      return era_violation(era, start, start + period - 1, counted, era.limit.rate.permits,
                           "permits per window, with the count carried, exceeded");
    }
  }
  if (era.end != never) {
    at_end.window_start = aligned_start(era.end, period);
    at_end.count = windows_moved_on(era, period) == 0 ? sums_before_end[at_end.window_start] : 0;
  }
  return {};
}

bool overlaps(std::int64_t a_start, std::int64_t a_length, std::int64_t b_start,
              std::int64_t b_length) {
  return a_start < b_start + b_length && b_start < a_start + a_length;
}

/// The version's aligned windows and weighted estimate, the old current and previous windows'
/// counts landing in the newest new window they overlap.
CheckResult sliding_counter_era(const Era& era, const StateAtChange& from, StateAtChange& at_end) {
  const std::int64_t period = era.limit.rate.period.count();
  const std::int64_t current = aligned_start(era.since, period);
  std::map<std::int64_t, Int128> sums;
  Int128 carried_current = 0;
  const bool touched_at_change = std::any_of(
      era.counted.begin(), era.counted.end(),
      [&](const VersionedAdmit& admit) { return aligned_start(admit.time_us, period) == current; });
  // Why: the implementation converts at the first request under this version; only when that
  // request fell in the window holding since are the old counts surely in it.
  if (era.before != nullptr && touched_at_change) {
    const std::int64_t old_period = era.before->rate.period.count();
    const std::int64_t old_current = from.window_start;
    const bool previous_in_current =
        overlaps(old_current - old_period, old_period, current, period);
    if (previous_in_current) {
      carried_current = carry_count(era, from.count + from.previous);
    } else {
      carried_current = carry_count(era, from.count);
      if (overlaps(old_current - old_period, old_period, current - period, period))
        sums[current - period] += carry_count(era, from.previous);
    }
    sums[current] += carried_current;
  }
  std::map<std::int64_t, Int128> sums_before_end = sums;
  for (const VersionedAdmit& admit : era.counted) {
    sums[aligned_start(admit.time_us, period)] += admit.permits;
    if (admit.time_us < era.end)
      sums_before_end[aligned_start(admit.time_us, period)] += admit.permits;
  }
  std::int64_t window = always;
  Int128 before = 0;
  Int128 at_same_time = 0;
  for (std::size_t k = 0; k < era.counted.size(); ++k) {
    const VersionedAdmit& admit = era.counted[k];
    const std::int64_t start = aligned_start(admit.time_us, period);
    if (start != window) {
      window = start;
      before = start == current ? carried_current : 0;
      at_same_time = 0;
    } else if (admit.time_us != era.counted[k - 1].time_us) {
      before += at_same_time;
      at_same_time = 0;
    }
    const auto previous_it = sums.find(start - period);
    const Int128 previous = previous_it == sums.end() ? 0 : previous_it->second;
    const Int128 weighted = previous - previous * (admit.time_us - start) / period;
    if (weighted + before + admit.permits > era.limit.rate.permits) {
      return era_violation(era, admit.time_us - period + 1, admit.time_us,
                           weighted + before + admit.permits, era.limit.rate.permits,
                           "weighted estimate, with the counts carried, exceeded at an admit");
    }
    at_same_time += admit.permits;
  }
  if (era.end != never) {
    at_end.window_start = aligned_start(era.end, period);
    const std::int64_t moved = windows_moved_on(era, period);
    at_end.count = moved <= 1 ? sums_before_end[at_end.window_start] : 0;
    at_end.previous = moved == 0 ? sums_before_end[at_end.window_start - period] : 0;
  }
  return {};
}

/// Every admission still in the log (of this run of sliding_window_log, after the cutoff) counts
/// in the trailing window of each admit under the version.
CheckResult sliding_log_era(const Era& era, const StateAtChange& from,
                            const std::vector<VersionedAdmit>& all, StateAtChange& at_end) {
  std::int64_t cutoff = always;
  std::int64_t first_version = era.version;
  if (era.before != nullptr) {
    first_version = from.log_first_version;
    // Entries outside the old window at the change no longer count (the key may have expired),
    // entries that old admissions trimmed are gone, and reset drops those at or before since.
    cutoff = std::max(from.log_cutoff, era.since - era.before->rate.period.count());
    if (era.carry == Carry::reset) cutoff = std::max(cutoff, era.since);
  }
  const std::int64_t window = era.limit.rate.period.count();
  at_end.log_cutoff = cutoff;
  at_end.log_first_version = first_version;
  for (const VersionedAdmit& admit : era.counted) {
    if (admit.policy_version == era.version)
      at_end.log_cutoff = std::max(at_end.log_cutoff, admit.time_us - window);
  }
  std::vector<VersionedAdmit> entries;
  for (const VersionedAdmit& admit : all)
    if (admit.policy_version >= first_version && admit.time_us > cutoff) entries.push_back(admit);
  std::vector<Int128> prefix(entries.size() + 1, 0);
  for (std::size_t k = 0; k < entries.size(); ++k)
    prefix[k + 1] = prefix[k] + entries[k].permits;
  for (const VersionedAdmit& admit : era.counted) {
    const auto upto = std::upper_bound(entries.begin(), entries.end(), admit, earlier);
    const auto from_it = std::upper_bound(
        entries.begin(), upto, admit.time_us - window,
        [](std::int64_t time, const VersionedAdmit& entry) { return time < entry.time_us; });
    const Int128 inside = prefix[static_cast<std::size_t>(upto - entries.begin())] -
                          prefix[static_cast<std::size_t>(from_it - entries.begin())];
    if (inside > era.limit.rate.permits) {
      return era_violation(era, admit.time_us - window + 1, admit.time_us, inside,
                           era.limit.rate.permits, "permits in the log's trailing window exceeded");
    }
  }
  return {};
}

CheckResult check_era(const Era& era, const StateAtChange& from,
                      const std::vector<VersionedAdmit>& all, StateAtChange& at_end) {
  switch (era.limit.algorithm) {
    case Algorithm::gcra:
    case Algorithm::token_bucket:
    case Algorithm::leaky_bucket:
      return bucket_era(era, from, at_end);
    case Algorithm::fixed_window:
      return fixed_window_era(era, from, at_end);
    case Algorithm::sliding_window_counter:
      return sliding_counter_era(era, from, at_end);
    case Algorithm::sliding_window_log:
      return sliding_log_era(era, from, all, at_end);
  }
  return {};
}

/// A limit's state in Redis: its algorithm and its position in the policy (the key's suffix).
using StateOfLimit = std::pair<Algorithm, std::size_t>;

/// The newest version admitted on a state so far, and when.
struct LastOnState {
  std::int64_t version = 0;
  std::int64_t time_us = 0;
};

CheckResult version_order(const std::vector<PolicyVersion>& history,
                          const std::vector<VersionedAdmit>& admits,
                          std::chrono::microseconds bound) {
  std::map<std::int64_t, const PolicyVersion*> version_of;
  for (const PolicyVersion& version : history)
    version_of[version.version] = &version;
  std::map<StateOfLimit, LastOnState> last_on;
  for (const VersionedAdmit& admit : admits) {
    const std::string what = "version " + std::to_string(admit.policy_version);
    const auto known = version_of.find(admit.policy_version);
    if (known == version_of.end())
      return violation(admit.time_us, admit.time_us, admit.permits, 0, what + " is unknown");
    if (admit.time_us < known->second->since_us) {
      return violation(admit.time_us, known->second->since_us, admit.permits, 0,
                       what + " used before it was stored");
    }
    const std::vector<Limit>& limits = known->second->policy.limits;
    for (std::size_t position = 0; position < limits.size(); ++position) {
      LastOnState& last = last_on[{limits[position].algorithm, position}];
      if (admit.policy_version < last.version) {
        return violation(last.time_us, admit.time_us, admit.permits, 0,
                         what + " used after version " + std::to_string(last.version) +
                             " on the same state (" +
                             std::string(to_string(limits[position].algorithm)) + ", limit #" +
                             std::to_string(position) + ")");
      }
      last = {admit.policy_version, admit.time_us};
    }
    for (auto newer = version_of.upper_bound(admit.policy_version); newer != version_of.end();
         ++newer) {
      if (admit.time_us > newer->second->since_us + bound.count()) {
        return violation(newer->second->since_us, admit.time_us, admit.permits, 0,
                         what + " used later than version " + std::to_string(newer->first) +
                             "'s since + the propagation bound");
      }
    }
  }
  return {};
}

}  // namespace

CheckResult check_transitions(std::vector<PolicyVersion> history,
                              std::vector<VersionedAdmit> admits,
                              std::chrono::microseconds propagation_bound) {
  std::sort(history.begin(), history.end(),
            [](const PolicyVersion& a, const PolicyVersion& b) { return a.version < b.version; });
  std::stable_sort(admits.begin(), admits.end(), earlier);
  if (CheckResult order = version_order(history, admits, propagation_bound); !order) return order;
  std::size_t positions = 0;
  for (const PolicyVersion& version : history)
    positions = std::max(positions, version.policy.limits.size());
  for (std::size_t position = 0; position < positions; ++position) {
    StateAtChange state;
    const Limit* previous = nullptr;
    for (std::size_t index = 0; index < history.size(); ++index) {
      const PolicyVersion& version = history[index];
      if (position >= version.policy.limits.size()) {
        previous = nullptr;
        continue;
      }
      const Limit& limit = version.policy.limits[position];
      Era era{
          limit,
          version.version,
          version.since_us,
          index + 1 < history.size() ? history[index + 1].since_us : never,
          version.carry,
          previous != nullptr && same_state(*previous, limit) ? previous : nullptr,
          {},
          "version " + std::to_string(version.version) + ", limit #" + std::to_string(position)};
      for (const VersionedAdmit& admit : admits) {
        if (admit.policy_version == era.version ||
            (admit.policy_version > era.version && admit.time_us < era.end)) {
          era.counted.push_back(admit);
        }
      }
      StateAtChange at_end;
      if (CheckResult result = check_era(era, state, admits, at_end); !result) return result;
      state = at_end;
      previous = &limit;
    }
  }
  return {};
}

std::int64_t largest_excess(const Limit& limit, std::vector<Admit> admits) {
  std::stable_sort(admits.begin(), admits.end(),
                   [](const Admit& a, const Admit& b) { return a.time_us < b.time_us; });
  // Scaled by the period P: excess(i, j) x P = (F(j) - F(i - 1)) x P - R x (t_j - t_i) - B x P,
  // with F the running sum of permits and R the permits per period; so the largest is
  // max over j of h(j) - min over i <= j of g(i), less B x P, with h(j) = F(j) x P - R x t_j
  // and g(i) = F(i - 1) x P - R x t_i.
  const Int128 period = limit.rate.period.count();
  const Int128 rate = limit.rate.permits;
  Int128 before = 0;  // F(i - 1)
  Int128 lowest = std::numeric_limits<std::int64_t>::max();
  Int128 largest = 0;
  for (const Admit& admit : admits) {
    lowest = std::min(lowest, before * period - rate * admit.time_us);
    before += admit.permits;
    largest = std::max(largest, before * period - rate * admit.time_us - lowest);
  }
  const Int128 excess = largest - static_cast<Int128>(capacity(limit)) * period;
  return excess > 0 ? static_cast<std::int64_t>(excess / period) : 0;
}

std::vector<Admit> read_hammer_admits(const std::string& path) {
  std::vector<Admit> admits;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.starts_with("deny ")) continue;
    std::istringstream fields(line);
    Admit admit;
    fields >> admit.time_us >> admit.permits;
    admits.push_back(admit);
  }
  return admits;
}

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
