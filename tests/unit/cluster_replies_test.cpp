#include "redis/cluster_replies.hpp"

#include <gtest/gtest.h>

#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

Reply integer(std::int64_t value) {
  Reply reply;
  reply.type = Reply::Type::integer;
  reply.integer = value;
  return reply;
}

Reply string(std::string text) {
  Reply reply;
  reply.type = Reply::Type::string;
  reply.str = std::move(text);
  return reply;
}

Reply array(std::vector<Reply> elements) {
  Reply reply;
  reply.type = Reply::Type::array;
  reply.elements = std::move(elements);
  return reply;
}

TEST(Redirect, MovedNamesTheSlotAndTheNewOwner) {
  const auto redirect = parse_redirect("MOVED 3999 127.0.0.1:7002", "10.0.0.9");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->kind, Redirect::Kind::moved);
  EXPECT_EQ(redirect->slot, 3999);
  EXPECT_EQ(redirect->target, (NodeAddress{"127.0.0.1", 7002}));
}

TEST(Redirect, AskWithAnEmptyHostMeansTheNodeThatAnswered) {
  const auto redirect = parse_redirect("ASK 16383 :7005", "10.0.0.9");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->kind, Redirect::Kind::ask);
  EXPECT_EQ(redirect->slot, 16383);
  EXPECT_EQ(redirect->target, (NodeAddress{"10.0.0.9", 7005}));
}

TEST(Redirect, AnIpv6TargetKeepsItsColons) {
  const auto redirect = parse_redirect("MOVED 1 ::1:7000", "x");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->target, (NodeAddress{"::1", 7000}));
  EXPECT_EQ(redirect->target.display(), "[::1]:7000");
}

TEST(Redirect, OtherErrorsAndMalformedRedirectsAreNotRedirects) {
  EXPECT_FALSE(parse_redirect("ERR unknown command", "h"));
  EXPECT_FALSE(parse_redirect("MOVED 16384 127.0.0.1:7000", "h"));
  EXPECT_FALSE(parse_redirect("MOVED x 127.0.0.1:7000", "h"));
  EXPECT_FALSE(parse_redirect("MOVED 12 127.0.0.1", "h"));
  EXPECT_FALSE(parse_redirect("MOVED 12", "h"));
}

TEST(ClusterSlots, EachRangeGoesToItsPrimaryAndReplicasAreIgnored) {
  const Reply reply = array({
      array({integer(0), integer(5460),
             array({string("127.0.0.1"), integer(7000), string("id-a"), array({})}),
             array({string("127.0.0.1"), integer(7003), string("id-d"), array({})})}),
      array({integer(5461), integer(16383), array({string(""), integer(7001), string("id-b")})}),
  });
  const auto ranges = parse_cluster_slots(reply, "10.1.1.1");
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 5460);
  EXPECT_EQ(ranges[0].primary, (NodeAddress{"127.0.0.1", 7000}));
  EXPECT_EQ(ranges[1].first, 5461);
  EXPECT_EQ(ranges[1].last, 16383);
  EXPECT_EQ(ranges[1].primary, (NodeAddress{"10.1.1.1", 7001}));
}

TEST(ClusterSlots, AnUnknownEndpointMeansTheNodeAskedAtTheGivenPort) {
  const Reply reply = array({
      array({integer(0), integer(100), array({Reply{}, integer(7000), string("id-a")})}),
      array({integer(101), integer(16383), array({string("?"), integer(7001), string("id-b")})}),
  });
  const auto ranges = parse_cluster_slots(reply, "10.1.1.1");
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].primary, (NodeAddress{"10.1.1.1", 7000}));
  EXPECT_EQ(ranges[1].primary, (NodeAddress{"10.1.1.1", 7001}));
}

TEST(ClusterSlots, AMalformedReplyIsAProtocolError) {
  EXPECT_THROW(parse_cluster_slots(string("no"), "h"), ProtocolError);
  EXPECT_THROW(
      parse_cluster_slots(
          array({array({integer(0), integer(16384), array({string("h"), integer(1)})})}), "h"),
      ProtocolError);
  EXPECT_THROW(parse_cluster_slots(array({array({integer(0), integer(1)})}), "h"), ProtocolError);
  EXPECT_THROW(parse_cluster_slots(
                   array({array({integer(0), integer(1), array({integer(5), integer(1)})})}), "h"),
               ProtocolError);
  EXPECT_TRUE(parse_cluster_slots(array({}), "h").empty());
}

}  // namespace
}  // namespace redlimit::detail
