#include "policy/key_format.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "redis/key_slot.hpp"
#include "redlimit/redis_keys.hpp"

namespace redlimit::detail {
namespace {

TEST(KeyFormat, AKeyTooLongToEscapeIsTheFirstHalfOfItsSha256InHex) {
  // SHA-256 of a million 'a' (the FIPS 180-2 test vector) starts cdc76e5c...
  EXPECT_EQ(key_part(std::string(1000000, 'a')), "%#CDC76E5C9914FB9281A1C7E284D73E67");
  EXPECT_EQ(key_part(std::string(200, 'a')).size(), 34u);
}

TEST(KeyFormat, EscapesBracesColonsPercentAndNonPrintableBytes) {
  EXPECT_EQ(escape_key_part("user-42@example.com"), "user-42@example.com");
  EXPECT_EQ(escape_key_part("a:b{c}d%e"), "a%3Ab%7Bc%7Dd%25e");
  EXPECT_EQ(escape_key_part(std::string("x\0y z\n", 6)), "x%00y%20z%0A");
  EXPECT_EQ(escape_key_part("\xc3\xa9"), "%C3%A9");
}

TEST(KeyFormat, UnescapeGivesBackWhatWasEscaped) {
  for (const std::string& raw :
       {std::string(), std::string("user-42@example.com"), std::string("a:b{c}d%e"),
        std::string("x\0y z\n", 6), std::string("\xc3\xa9"), std::string("100%")}) {
    EXPECT_EQ(unescape_key_part(escape_key_part(raw)), raw);
  }
}

TEST(KeyFormat, UnescapeRefusesWhatEscapeNeverWrites) {
  EXPECT_EQ(unescape_key_part("%41"), std::nullopt);  // "A" is written as it is
  EXPECT_EQ(unescape_key_part("%3a"), std::nullopt);  // lower-case hex
  EXPECT_EQ(unescape_key_part("a%3"), std::nullopt);  // cut short
  EXPECT_EQ(unescape_key_part("a%"), std::nullopt);
  EXPECT_EQ(unescape_key_part("%G0"), std::nullopt);
  EXPECT_EQ(unescape_key_part("a:b"), std::nullopt);  // ':' is always escaped
  EXPECT_EQ(unescape_key_part("a b"), std::nullopt);  // and so is a space
  EXPECT_EQ(unescape_key_part(key_part(std::string(500, 'k'))), std::nullopt);  // a digest
}

TEST(KeyFormat, TheNameAndKeyFormTheHashTag) {
  EXPECT_EQ(key_base("rl", "sms", "user:1").view(), "rl:{sms:user%3A1}");
  EXPECT_EQ(hash_tag(key_base("rl", "api", "k{x}").str() + ":gcra:0"), "api:k%7Bx%7D");
}

TEST(KeyFormat, LongKeysBecomeAFixedLengthDigest) {
  const std::string long_key(500, 'k');
  const std::string part = key_part(long_key);
  EXPECT_EQ(part.size(), 34u);
  EXPECT_EQ(part.substr(0, 2), "%#");
  EXPECT_NE(key_part(long_key + "x"), part);
  EXPECT_EQ(key_part(std::string(max_escaped_key, 'k')), std::string(max_escaped_key, 'k'));
}

TEST(KeyBase, ShortAndLongTextsSurviveCopiesAndAssignments) {
  const std::string prefix(64, 'p');
  for (const std::string& key : {std::string("k"), std::string(max_escaped_key, 'k'),
                                 std::string(500, 'k'), std::string(50, ':')}) {
    const std::string expected =
        prefix + ":{" + escape_key_part("name") + ":" + key_part(key) + "}";
    const KeyBase base = key_base(prefix, escape_key_part("name"), key);
    EXPECT_EQ(base.view(), expected);
    const KeyBase copy = base;
    EXPECT_EQ(copy.view(), expected);
    KeyBase assigned(std::string_view("short"));
    assigned = copy;
    EXPECT_EQ(assigned.view(), expected);
    assigned = KeyBase(std::string_view("short again"));
    EXPECT_EQ(assigned.view(), "short again");
    EXPECT_EQ(copy.view(), expected);
    KeyBase source = copy;
    const KeyBase moved(std::move(source));
    EXPECT_EQ(moved.view(), expected);
    source = KeyBase(std::string_view("reused"));
    EXPECT_EQ(source.view(), "reused");
    assigned = std::move(source);
    EXPECT_EQ(assigned.view(), "reused");
    EXPECT_EQ(moved.view(), expected);
  }
}

/// Random byte strings rich in the bytes that matter: braces, colons, '%', '#', NUL, UTF-8.
std::string random_part(std::mt19937_64& random) {
  static const std::string alphabet = std::string("{}:%#ab\0\xc3\xa9\xff ", 12);
  std::uniform_int_distribution<int> length(1, 12);
  std::uniform_int_distribution<int> rare(0, 199);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string out;
  const int n = rare(random) == 0 ? 200 : length(random);  // now and then, one needs a digest
  for (int i = 0; i < n; ++i)
    out += alphabet[pick(random)];
  return out;
}

TEST(KeyFormat, NoTwoNameKeyPairsShareARedisKeyAndADecisionStaysInOneSlot) {
  std::mt19937_64 random(20261122);
  std::set<std::pair<std::string, std::string>> pairs;
  std::set<std::string> keys;
  const std::string suffixes[] = {":gcra:0", ":fixed_window:1", ":sliding_window_log:2"};
  for (int i = 0; i < 50000; ++i) {
    const std::string name = random_part(random);
    const std::string key = random_part(random);
    if (!pairs.emplace(name, key).second) continue;
    const std::string base = key_base("rl", escape_key_part(name), key).str();
    EXPECT_TRUE(keys.insert(base).second) << "collision for a different (name, key) pair";
    const std::uint16_t slot = key_slot(base + suffixes[0]);
    for (const auto& suffix : suffixes)
      EXPECT_EQ(key_slot(base + suffix), slot);
    EXPECT_EQ(hash_tag(base), base.substr(4, base.size() - 5));  // all of "name:key"
  }
  EXPECT_GT(pairs.size(), 40000u);
}

TEST(RedisKeys, GlobCharactersOfANameAreLiteralInTheScanPattern) {
  EXPECT_EQ(state_keys_pattern("rl", R"(a*b?c[d]e\f)"), R"(rl:{a\*b\?c\[d\]e\\f:*)");
  EXPECT_EQ(state_keys_pattern("rl", "a:b"), "rl:{a%3Ab:*");
}

TEST(RedisKeys, AStateKeyGivesBackTheApplicationsKey) {
  for (const std::string key : {"user:42", "k{x}%", "", "with space", "\xc3\xa9", "a*b"}) {
    const std::string redis_key =
        key_base("rl", escape_key_part("sms"), key).str() + ":fixed_window:1";
    const StateKey parsed = parse_state_key(redis_key, "rl", "sms");
    EXPECT_EQ(parsed.kind, StateKey::Kind::key) << redis_key;
    EXPECT_EQ(parsed.key, key);
  }
}

TEST(RedisKeys, OtherKeysAreNotStateKeys) {
  const auto kind = [](std::string_view redis_key) {
    return parse_state_key(redis_key, "rl", "sms").kind;
  };
  EXPECT_EQ(kind("rl:{sms:u1}:gcra:0"), StateKey::Kind::key);
  EXPECT_EQ(kind("rl:{sms:u1}:gcra"), StateKey::Kind::other);
  EXPECT_EQ(kind("rl:{sms:u1}:lease:0"), StateKey::Kind::other);
  EXPECT_EQ(kind("rl:{sms:u1}:reset"), StateKey::Kind::other);  // Limiter::reset()'s mark
  EXPECT_EQ(kind("rl:{sms:u1}:gcra:x"), StateKey::Kind::other);
  EXPECT_EQ(kind("rl:{sms%@client7:u1}:gcra:0"), StateKey::Kind::other);  // per_client
  EXPECT_EQ(kind("rl:{smsx:u1}:gcra:0"), StateKey::Kind::other);
  EXPECT_EQ(kind("other:{sms:u1}:gcra:0"), StateKey::Kind::other);
  EXPECT_EQ(kind("rl:{sms:u%3a1}:gcra:0"), StateKey::Kind::other);  // never written: lower case
  const std::string long_key(300, 'k');
  const std::string digest = key_base("rl", "sms", long_key).str() + ":token_bucket:0";
  EXPECT_EQ(kind(digest), StateKey::Kind::digest);
}

TEST(RedisKeys, APrefixIsOneTo64NameCharacters) {
  EXPECT_TRUE(redlimit::is_valid_prefix("rl"));
  EXPECT_TRUE(redlimit::is_valid_prefix("a.b-c_D9"));
  EXPECT_FALSE(redlimit::is_valid_prefix(""));
  EXPECT_FALSE(redlimit::is_valid_prefix("bad prefix"));
  EXPECT_FALSE(redlimit::is_valid_prefix("rl:x"));
  EXPECT_FALSE(redlimit::is_valid_prefix(std::string(65, 'p')));
}

TEST(RedisKeys, ANameIsOneTo128BytesAndAKeyOneTo65536) {
  EXPECT_TRUE(redlimit::is_valid_name("sms"));
  EXPECT_TRUE(redlimit::is_valid_name(std::string(128, 'n')));
  EXPECT_FALSE(redlimit::is_valid_name(""));
  EXPECT_FALSE(redlimit::is_valid_name(std::string(129, 'n')));
  EXPECT_TRUE(redlimit::is_valid_key("user:42 with spaces"));
  EXPECT_TRUE(redlimit::is_valid_key(std::string(65536, 'k')));
  EXPECT_FALSE(redlimit::is_valid_key(""));
  EXPECT_FALSE(redlimit::is_valid_key(std::string(65537, 'k')));
}

}  // namespace
}  // namespace redlimit::detail
