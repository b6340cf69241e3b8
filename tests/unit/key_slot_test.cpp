#include "redis/key_slot.hpp"

#include <gtest/gtest.h>

namespace redlimit::detail {
namespace {

TEST(KeySlot, Crc16MatchesTheClusterSpecificationCheckValue) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // from the Redis Cluster specification
}

TEST(KeySlot, MatchesSlotsRedisComputes) {
  // Values from CLUSTER KEYSLOT on a Redis cluster.
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(key_slot("foo"), 12182);
}

TEST(KeySlot, HashesOnlyTheFirstNonEmptyHashTag) {
  EXPECT_EQ(hash_tag("rl:{sms:user}:gcra"), "sms:user");
  EXPECT_EQ(key_slot("a{user1000}b"), key_slot("user1000"));
  EXPECT_EQ(hash_tag("{}{x}"), "{}{x}");  // an empty tag hashes the whole key
  EXPECT_EQ(hash_tag("no-tag"), "no-tag");
  EXPECT_EQ(hash_tag("rl:{a}b}"), "a");  // the first '}' after the first '{' ends the tag
  EXPECT_EQ(hash_tag("open{only"), "open{only");
}

}  // namespace
}  // namespace redlimit::detail
