// What ClientOptions::replicas holds until the replicas have it: the replies that wrote what a
// failover could lose, and not the reads.
#include "limiter/replica_writes.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "lua_scripts.hpp"

namespace redlimit::detail {
namespace {

Reply integers(std::initializer_list<std::int64_t> values) {
  Reply reply;
  reply.type = Reply::Type::array;
  for (const std::int64_t value : values) {
    Reply element;
    element.type = Reply::Type::integer;
    element.integer = value;
    reply.elements.push_back(element);
  }
  return reply;
}

bool wrote(std::string_view operation, const Reply& reply) {
  const std::array<std::string_view, 1> args{operation};
  return reply_wrote(scripts::reserve, args, reply);
}

TEST(ReplicaWrites, AReservationsLocateIsAReadAndItsConfirmEndsALeaseRegistration) {
  const Reply moved = integers({0, 1'800'000'000'000'000, 1, 1'800'000'000'200'000, 0, 3});
  EXPECT_FALSE(wrote("locate", moved));
  EXPECT_TRUE(wrote("confirm", moved));
}

TEST(ReplicaWrites, AReservationCountsOnlyWhenMade) {
  EXPECT_TRUE(wrote("reserve", integers({1, 0})));
  EXPECT_FALSE(wrote("reserve", integers({0, 0})));
}

}  // namespace
}  // namespace redlimit::detail
