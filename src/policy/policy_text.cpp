// The limit factories and the text form of a policy (Policy::parse, to_string).
#include <algorithm>
#include <array>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {
namespace {

constexpr std::array all_algorithms{
    Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
    Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter,
};

constexpr std::string_view spaces = " \t\n";

/// The option word that sets Limit::burst for `algorithm`.
std::string_view capacity_word(Algorithm algorithm) {
  return algorithm == Algorithm::leaky_bucket ? "queue" : "burst";
}

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(spaces);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(spaces) - first + 1);
}

std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  while (true) {
    const auto start = text.find_first_not_of(spaces);
    if (start == std::string_view::npos) return words;
    text.remove_prefix(start);
    const auto end = std::min(text.find_first_of(spaces), text.size());
    words.push_back(text.substr(0, end));
    text.remove_prefix(end);
  }
}

/// Parses one limit's words; `where` names it in errors ("Policy::parse(...): limit 2").
class LimitParser {
 public:
  LimitParser(std::string_view text, std::string where)
      : words_(words_of(text)), where_(std::move(where)) {}

  Limit parse() {
    if (words_.empty()) fail("is empty; expected \"<algorithm> <rate> [options]\"");
    Limit limit;
    limit.algorithm = algorithm(words_[0]);
    if (words_.size() < 2) fail("has no rate after its algorithm");
    limit.rate = rate(words_[1]);
    for (std::size_t i = 2; i < words_.size(); ++i) {
      const std::string_view word = words_[i];
      if (word == "anchored" || word == "aligned") {
        limit.window = word == "anchored" ? Window::anchored : Window::aligned;
      } else if (word == "burst" || word == "queue") {
        if (word != capacity_word(limit.algorithm)) {
          fail("takes no '" + std::string(word) + "' (use '" +
               std::string(capacity_word(limit.algorithm)) + "')");
        }
        if (i + 1 == words_.size()) fail("has no number after '" + std::string(word) + "'");
        limit.burst = count(words_[++i]);
      } else {
        fail("has an unknown option '" + std::string(word) + "' (use burst <n>, queue <n>, " +
             "anchored or aligned)");
      }
    }
    return limit;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(where_ + " " + why);
  }

  Algorithm algorithm(std::string_view word) const {
    for (const Algorithm candidate : all_algorithms) {
      if (word == to_string(candidate)) return candidate;
    }
    fail("has an unknown algorithm '" + std::string(word) +
         "' (use gcra, token_bucket, leaky_bucket, fixed_window, sliding_window_log or "
         "sliding_window_counter)");
  }

  Rate rate(std::string_view word) const {
    try {
      return Rate::parse(word);
    } catch (const InvalidArgument& e) {
      fail("has a bad rate: " + std::string(e.what()));
    }
  }

  std::int64_t count(std::string_view word) const {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (word.empty() || word.front() < '0' || word.front() > '9' || ec != std::errc{} ||
        end != word.data() + word.size()) {
      fail("has '" + std::string(word) + "' where a decimal integer belongs");
    }
    return value;
  }

  std::vector<std::string_view> words_;
  std::string where_;
};

/// The scope a clause `scope overall` or `scope per_client` names.
Scope parse_scope(const std::vector<std::string_view>& words, const std::string& where) {
  if (words.size() == 2 && words[1] == "overall") return Scope::overall;
  if (words.size() == 2 && words[1] == "per_client") return Scope::per_client;
  throw InvalidArgument(where + " has a bad scope clause (use 'scope overall' or " +
                        "'scope per_client')");
}

Limit with_capacity(Algorithm algorithm, Rate rate, std::int64_t burst) {
  return Limit{algorithm, rate, burst, Window::aligned};
}

}  // namespace

Limit Limit::gcra(Rate rate, std::int64_t burst) {
  return with_capacity(Algorithm::gcra, rate, burst);
}
Limit Limit::gcra(std::string_view rate, std::int64_t burst) {
  return gcra(Rate::parse(rate), burst);
}
Limit Limit::token_bucket(Rate rate, std::int64_t burst) {
  return with_capacity(Algorithm::token_bucket, rate, burst);
}
Limit Limit::token_bucket(std::string_view rate, std::int64_t burst) {
  return token_bucket(Rate::parse(rate), burst);
}
Limit Limit::leaky_bucket(Rate rate, std::int64_t queue) {
  return with_capacity(Algorithm::leaky_bucket, rate, queue);
}
Limit Limit::leaky_bucket(std::string_view rate, std::int64_t queue) {
  return leaky_bucket(Rate::parse(rate), queue);
}
Limit Limit::fixed_window(Rate rate, Window window) {
  return Limit{Algorithm::fixed_window, rate, 0, window};
}
Limit Limit::fixed_window(std::string_view rate, Window window) {
  return fixed_window(Rate::parse(rate), window);
}
Limit Limit::sliding_window_log(Rate rate) {
  return with_capacity(Algorithm::sliding_window_log, rate, 0);
}
Limit Limit::sliding_window_log(std::string_view rate) {
  return sliding_window_log(Rate::parse(rate));
}
Limit Limit::sliding_window_counter(Rate rate) {
  return with_capacity(Algorithm::sliding_window_counter, rate, 0);
}
Limit Limit::sliding_window_counter(std::string_view rate) {
  return sliding_window_counter(Rate::parse(rate));
}

Policy Policy::parse(std::string_view text) {
  const std::string where = "Policy::parse(\"" + std::string(text) + "\"):";
  Policy policy;
  std::string_view rest = text;
  while (true) {
    const auto semicolon = rest.find(';');
    const std::string_view part = trimmed(rest.substr(0, semicolon));
    const std::vector<std::string_view> words = words_of(part);
    if (!words.empty() && words.front() == "scope") {
      policy.scope = parse_scope(words, where);
    } else if (!(part.empty() && semicolon == std::string_view::npos && !policy.limits.empty())) {
      // Why: one ';' may end the text ("gcra 10/s;"); an empty limit anywhere else is an error.
      policy.limits.push_back(
          LimitParser(part, where + " limit " + std::to_string(policy.limits.size() + 1)).parse());
    }
    if (semicolon == std::string_view::npos) return policy;
    rest.remove_prefix(semicolon + 1);
  }
}

std::string to_string(const Limit& limit) {
  std::string text = std::string(to_string(limit.algorithm)) + " " + to_string(limit.rate);
  if (limit.burst != 0) {
    text += " " + std::string(capacity_word(limit.algorithm)) + " " + std::to_string(limit.burst);
  }
  if (limit.window == Window::anchored) text += " anchored";
  return text;
}

std::string to_string(const Policy& policy) {
  std::string text;
  for (const Limit& limit : policy.limits) {
    if (!text.empty()) text += "; ";
    text += to_string(limit);
  }
  if (policy.scope == Scope::per_client) text += "; scope per_client";
  return text;
}

}  // namespace redlimit
