#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace redlimit::detail {

/// Keys whose escaped form is longer than this are replaced by a digest.
inline constexpr std::size_t max_escaped_key = 128;
/// The largest key a limiter accepts, in bytes.
inline constexpr std::size_t max_key_bytes = 65536;
/// The longest name a limiter or semaphore accepts, in bytes.
inline constexpr std::size_t max_name_bytes = 128;

/// True for a key prefix of 1 to 64 characters from [A-Za-z0-9_.-].
bool is_valid_prefix(std::string_view prefix);
/// Escapes one part of a key so that the encoding is injective and cannot break the hash tag:
/// '{', '}', ':', '%' and bytes outside the printable ASCII range become %XX (upper-case hex).
std::string escape_key_part(std::string_view raw);
/// The raw part that escape_key_part() turned into `escaped`; nullopt for a text it never
/// writes (a malformed or lower-case %XX, an unescaped byte it escapes, a "%#" digest).
std::optional<std::string> unescape_key_part(std::string_view escaped);
/// The escaped key, or "%#" and 32 hex digits of SHA-256 of the raw key when the escaped form
/// is longer than max_escaped_key ("%#" never appears in an escaped part).
std::string key_part(std::string_view raw);

/// The text of a key base (see key_base()), kept inside the object when it is short. Why not
/// std::string: a key base is made for every decision, mostly longer than a std::string keeps
/// without allocating; this one lives in the (pooled) coroutine frames that carry it.
class KeyBase {
 public:
  KeyBase() = default;
  explicit KeyBase(std::string_view text) { std::ranges::copy(text, prepare(text.size())); }
  KeyBase(const KeyBase& other) : KeyBase(other.view()) {}
  KeyBase(KeyBase&& other) noexcept { *this = std::move(other); }
  KeyBase& operator=(const KeyBase& other) { return *this = KeyBase(other.view()); }
  KeyBase& operator=(KeyBase&& other) noexcept;

  std::string_view view() const noexcept { return {heap_ ? heap_.get() : inline_.data(), size_}; }
  std::string str() const { return std::string(view()); }
  /// Room for exactly `size` characters, which the caller writes; the old text is gone.
  char* prepare(std::size_t size);

 private:
  std::size_t size_ = 0;
  std::array<char, 96> inline_;
  std::unique_ptr<char[]> heap_;  ///< only for a text longer than inline_
};

/// Hashes std::string and std::string_view alike: a map with it and std::equal_to<> is searched
/// by a view without copying it into a std::string.
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};

/// The hash of the fleet's decision counts for a limiter name (StatsPublisher, `redlimit
/// watch`): `<prefix>:stats:{<escaped name>}`.
std::string stats_key(std::string_view prefix, std::string_view escaped_name);
/// `<prefix>:stats:names`: the raw limiter names whose fleet counts were published, scored by
/// the Redis time of their last publication in ms.
std::string stats_names_key(std::string_view prefix);
/// `<prefix>:{<name>:<key>}`: the common start of every Redis key of one decision. The braces
/// make `<name>:<key>` the hash tag, so all keys of a decision share one cluster slot.
KeyBase key_base(std::string_view prefix, std::string_view escaped_name, std::string_view raw_key);

}  // namespace redlimit::detail
