#include "url_redaction.hpp"

#include <algorithm>

namespace redlimit_cli {
namespace {

/// Where a URL's credentials are: the text before the last '@' of what follows "://" (all of
/// the URL's start when it has no scheme). Empty when there is no '@'.
struct Credentials {
  std::size_t begin = 0;
  std::size_t end = 0;  ///< the '@'
  bool found = false;
};

// Why the last '@': a password may contain an unencoded '@'; the host part never does.
Credentials find_credentials(std::string_view url) {
  const auto scheme = url.find("://");
  const std::size_t begin = scheme == std::string_view::npos ? 0 : scheme + 3;
  const auto at = url.rfind('@');
  if (at == std::string_view::npos || at < begin) return {};
  return {begin, at, true};
}

/// The password part of `url`'s credentials as written ("user:pw" -> "pw", "pw" -> "pw").
std::string_view written_password(std::string_view url) {
  const Credentials credentials = find_credentials(url);
  if (!credentials.found) return {};
  const std::string_view text = url.substr(credentials.begin, credentials.end - credentials.begin);
  const auto colon = text.find(':');
  return colon == std::string_view::npos ? text : text.substr(colon + 1);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int high = text[i] == '%' && i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    const int low = high >= 0 ? hex_value(text[i + 2]) : -1;
    if (low < 0) {
      out += text[i];
      continue;
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

/// Secrets shorter than this are replaced only where they stand alone (see stands_alone).
constexpr std::size_t short_secret = 8;

/// Whether `c` may end a word a password is: space, a quote, or URL or list punctuation.
bool separates(char c) {
  constexpr std::string_view separators = " \t\r\n\"':@/,;()=";
  return separators.find(c) != std::string_view::npos;
}

/// Whether `length` bytes at `at` of `text` are a word of their own (see separates).
bool stands_alone(std::string_view text, std::size_t at, std::size_t length) {
  const std::size_t end = at + length;
  return (at == 0 || separates(text[at - 1])) && (end == text.size() || separates(text[end]));
}

/// Replaces `secret` in `text` by "***": anywhere when it is long; where it stands alone when
/// it is short (a password "1" must not turn "127.0.0.1" into "***27.0.0.***", which garbles
/// the text and gives the password away).
void replace_secret(std::string& text, std::string_view secret) {
  if (secret.empty()) return;
  constexpr std::string_view mask = "***";
  for (auto at = text.find(secret); at != std::string::npos;) {
    if (secret.size() < short_secret && !stands_alone(text, at, secret.size())) {
      at = text.find(secret, at + 1);
      continue;
    }
    text.replace(at, secret.size(), mask);
    at = text.find(secret, at + mask.size());
  }
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

std::string redact_url(std::string_view url) {
  const Credentials credentials = find_credentials(url);
  if (!credentials.found) return std::string(url);
  const std::string_view text = url.substr(credentials.begin, credentials.end - credentials.begin);
  const auto colon = text.find(':');
  const std::string user =
      colon == std::string_view::npos ? std::string() : std::string(text.substr(0, colon)) + ":";
  return std::string(url.substr(0, credentials.begin)) + user + "***" +
         std::string(url.substr(credentials.end));
}

Redactor::Redactor(std::string_view url, std::string_view other_secret)
    : url_(url), shown_url_(redact_url(url)) {
  if (!other_secret.empty()) secrets_.emplace_back(other_secret);
  const std::string_view written = written_password(url);
  if (written.empty()) return;
  secrets_.emplace_back(written);
  if (std::string decoded = percent_decoded(written); decoded != written)
    secrets_.push_back(std::move(decoded));
}

std::string Redactor::operator()(std::string_view text) const {
  std::string out(text);
  if (url_ != shown_url_) replace_all(out, url_, shown_url_);
  // Why the longest first: one secret may hold another, whose replacement would leave the rest.
  std::vector<const std::string*> longest_first;
  for (const std::string& secret : secrets_)
    longest_first.push_back(&secret);
  std::sort(longest_first.begin(), longest_first.end(),
            [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
  for (const std::string* secret : longest_first)
    replace_secret(out, *secret);
  return out;
}

}  // namespace redlimit_cli
