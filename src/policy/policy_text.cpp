// The limit factories and the text form of a policy (Policy::parse, to_string).
#include <algorithm>
#include <array>
#include <charconv>
#include <string>
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

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw InvalidArgument(where + " " + why);
}

/// Parses one limit's words; `where` names it in errors ("Policy::parse(...): limit 2").
Limit parse_limit(const std::vector<std::string_view>& words, const std::string& where) {
  if (words.empty()) fail(where, "is empty; expected \"<algorithm> <rate> [options]\"");
  const auto algorithm =
      std::find_if(all_algorithms.begin(), all_algorithms.end(),
                   [&words](Algorithm known) { return words[0] == to_string(known); });
  if (algorithm == all_algorithms.end()) {
    fail(where, "has an unknown algorithm '" + std::string(words[0]) +
                    "' (use gcra, token_bucket, leaky_bucket, fixed_window, sliding_window_log or "
                    "sliding_window_counter)");
  }
  Limit limit;
  limit.algorithm = *algorithm;
  if (words.size() < 2) fail(where, "has no rate after its algorithm");
  try {
    limit.rate = Rate::parse(words[1]);
  } catch (const InvalidArgument& e) {
    fail(where, "has a bad rate: " + std::string(e.what()));
  }
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string_view word = words[i];
    if (word == "anchored" || word == "aligned") {
      limit.window = word == "anchored" ? Window::anchored : Window::aligned;
    } else if (word == "burst" || word == "queue") {
      if (word != capacity_word(limit.algorithm)) {
        fail(where, "takes no '" + std::string(word) + "' (use '" +
                        std::string(capacity_word(limit.algorithm)) + "')");
      }
      if (i + 1 == words.size()) fail(where, "has no number after '" + std::string(word) + "'");
      const std::string_view number = words[++i];
      const auto [end, ec] =
          std::from_chars(number.data(), number.data() + number.size(), limit.burst);
      if (number.empty() || number.front() < '0' || number.front() > '9' || ec != std::errc{} ||
          end != number.data() + number.size()) {
        fail(where, "has '" + std::string(number) + "' where a decimal integer belongs");
      }
    } else {
      fail(where, "has an unknown option '" + std::string(word) +
                      "' (use burst <n>, queue <n>, anchored or aligned)");
    }
  }
  return limit;
}

}  // namespace

Limit Limit::gcra(Rate rate, std::int64_t burst) {
  return Limit{Algorithm::gcra, rate, burst, Window::aligned};
}
Limit Limit::gcra(std::string_view rate, std::int64_t burst) {
  return gcra(Rate::parse(rate), burst);
}
Limit Limit::token_bucket(Rate rate, std::int64_t burst) {
  return Limit{Algorithm::token_bucket, rate, burst, Window::aligned};
}
Limit Limit::token_bucket(std::string_view rate, std::int64_t burst) {
  return token_bucket(Rate::parse(rate), burst);
}
Limit Limit::leaky_bucket(Rate rate, std::int64_t queue) {
  return Limit{Algorithm::leaky_bucket, rate, queue, Window::aligned};
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
  return Limit{Algorithm::sliding_window_log, rate, 0, Window::aligned};
}
Limit Limit::sliding_window_log(std::string_view rate) {
  return sliding_window_log(Rate::parse(rate));
}
Limit Limit::sliding_window_counter(Rate rate) {
  return Limit{Algorithm::sliding_window_counter, rate, 0, Window::aligned};
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
    const std::vector<std::string_view> words = words_of(rest.substr(0, semicolon));
    if (!words.empty() && words.front() == "scope") {
      if (words.size() != 2 || (words[1] != "overall" && words[1] != "per_client")) {
        throw InvalidArgument(where + " has a bad scope clause (use 'scope overall' or " +
                              "'scope per_client')");
      }
      policy.scope = words[1] == "overall" ? Scope::overall : Scope::per_client;
    } else if (!(words.empty() && semicolon == std::string_view::npos && !policy.limits.empty())) {
      // Why: one ';' may end the text ("gcra 10/s;"); an empty limit anywhere else is an error.
      policy.limits.push_back(
          parse_limit(words, where + " limit " + std::to_string(policy.limits.size() + 1)));
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
