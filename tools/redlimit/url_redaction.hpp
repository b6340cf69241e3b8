#pragma once
// Keeping the Redis password out of everything the command prints.

#include <string>
#include <string_view>
#include <vector>

namespace redlimit_cli {

/// `url` with its password replaced by "***": "redis://user:***@host:6379",
/// "redis://***@host" (a password without a user). A URL without credentials is returned as
/// it is.
std::string redact_url(std::string_view url);

/// Removes one URL's password from any text the command prints (an error message may quote
/// the URL, or a library may quote the password): the URL becomes redact_url(url), and the
/// password, as written in the URL and percent-decoded, becomes "***"; so does `other_secret`
/// (the sentinels' password), if not empty. A password shorter than 8 bytes is replaced only
/// where it stands alone, between spaces, quotes or URL punctuation (":1@", not "127.0.0.1").
class Redactor {
 public:
  explicit Redactor(std::string_view url, std::string_view other_secret = {});
  /// `text` without the password.
  std::string operator()(std::string_view text) const;
  /// The URL as it may be shown.
  const std::string& shown_url() const noexcept { return shown_url_; }

 private:
  std::string url_;
  std::string shown_url_;
  /// The password as written in the URL, and percent-decoded when that differs.
  std::vector<std::string> secrets_;
};

}  // namespace redlimit_cli
