#include "redis/reply_builder.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <memory>
#include <string>
#include <string_view>

namespace redlimit::detail {
namespace {

struct FreeWholeReply {
  void operator()(void* reply) const { reply_builder()->freeObject(reply); }
};
/// A whole reply made by the reader, freed the way hiredis frees it.
using WholeReply = std::unique_ptr<void, FreeWholeReply>;

/// A hiredis reader building Replies, fed RESP bytes by the test.
class Reader {
 public:
  Reader() : reader_(redisReaderCreateWithFunctions(reply_builder())) {}
  ~Reader() { redisReaderFree(reader_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  void feed(std::string_view bytes) {
    ASSERT_EQ(redisReaderFeed(reader_, bytes.data(), bytes.size()), REDIS_OK);
  }
  /// The next whole reply, or null while the bytes so far do not complete one.
  WholeReply next() {
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader_, &reply), REDIS_OK) << reader_->errstr;
    return WholeReply(reply);
  }
  redisReader& hiredis() { return *reader_; }

 private:
  redisReader* reader_;
};

/// The one reply `bytes` hold, moved out of the reader's object.
Reply parse(std::string_view bytes) {
  Reader reader;
  reader.feed(bytes);
  WholeReply whole = reader.next();
  if (whole == nullptr) {
    ADD_FAILURE() << "no whole reply in " << bytes;
    return {};
  }
  EXPECT_EQ(reader.next(), nullptr) << "more than one reply in " << bytes;
  return std::move(built_reply(whole.get()));
}

TEST(ReplyBuilder, BulkStringsKeepEveryByteIncludingNulAndLineBreaks) {
  const std::string binary("a\0b\r\nc\xff", 7);
  const Reply reply = parse("$7\r\n" + binary + "\r\n");
  EXPECT_EQ(reply.type, Reply::Type::string);
  EXPECT_EQ(reply.str, binary);

  const std::string long_text(1000, 'x');  // beyond any small-string buffer
  EXPECT_EQ(parse("$1000\r\n" + long_text + "\r\n").as_string(), long_text);

  const Reply empty = parse("$0\r\n\r\n");
  EXPECT_EQ(empty.type, Reply::Type::string);
  EXPECT_EQ(empty.str, "");
}

TEST(ReplyBuilder, StatusAndErrorRepliesKeepTheirTypes) {
  const Reply status = parse("+OK\r\n");
  EXPECT_EQ(status.type, Reply::Type::status);
  EXPECT_EQ(status.str, "OK");

  const Reply error = parse("-NOSCRIPT No matching script. Please use EVAL.\r\n");
  EXPECT_EQ(error.type, Reply::Type::error);
  EXPECT_EQ(error.str, "NOSCRIPT No matching script. Please use EVAL.");
}

TEST(ReplyBuilder, IntegersAreIntegersOverTheWholeRange) {
  EXPECT_EQ(parse(":42\r\n").as_integer(), 42);
  EXPECT_EQ(parse(":0\r\n").as_integer(), 0);
  EXPECT_EQ(parse(":9223372036854775807\r\n").as_integer(), LLONG_MAX);
  EXPECT_EQ(parse(":-9223372036854775808\r\n").as_integer(), LLONG_MIN);
}

TEST(ReplyBuilder, NilBulkStringsAndNilArraysAreNil) {
  EXPECT_TRUE(parse("$-1\r\n").is_nil());
  EXPECT_TRUE(parse("*-1\r\n").is_nil());
}

TEST(ReplyBuilder, NestedArraysKeepTheirShape) {
  // [[1, ["abc"]], [], nil array, nil string, "OK" status, error]
  const Reply reply = parse(
      "*6\r\n"
      "*2\r\n:1\r\n*1\r\n$3\r\nabc\r\n"
      "*0\r\n"
      "*-1\r\n"
      "$-1\r\n"
      "+OK\r\n"
      "-ERR inner\r\n");
  ASSERT_EQ(reply.as_array().size(), 6u);
  const Reply& pair = reply.elements[0];
  ASSERT_EQ(pair.as_array().size(), 2u);
  EXPECT_EQ(pair.elements[0].as_integer(), 1);
  ASSERT_EQ(pair.elements[1].as_array().size(), 1u);
  EXPECT_EQ(pair.elements[1].elements[0].type, Reply::Type::string);
  EXPECT_EQ(pair.elements[1].elements[0].str, "abc");
  EXPECT_EQ(reply.elements[1].type, Reply::Type::array);
  EXPECT_TRUE(reply.elements[1].elements.empty());
  EXPECT_TRUE(reply.elements[2].is_nil());
  EXPECT_TRUE(reply.elements[3].is_nil());
  EXPECT_EQ(reply.elements[4].type, Reply::Type::status);
  EXPECT_EQ(reply.elements[4].str, "OK");
  EXPECT_EQ(reply.elements[5].type, Reply::Type::error);
  EXPECT_EQ(reply.elements[5].str, "ERR inner");
}

/// `depth` arrays, each holding its level's number and the next array; the last one "leaf".
std::string nested_arrays(int depth) {
  std::string bytes;
  for (int i = 0; i < depth; ++i)
    bytes += "*2\r\n:" + std::to_string(i) + "\r\n";
  return bytes + "$4\r\nleaf\r\n";
}

constexpr int deepest_nesting = 8;  ///< hiredis 0.14 refuses a ninth array inside eight

TEST(ReplyBuilder, ArraysNestedAsDeepAsHiredisReadsAreBuilt) {
  constexpr int depth = deepest_nesting;
  const Reply reply = parse(nested_arrays(depth));
  const Reply* level = &reply;
  for (int i = 0; i < depth; ++i) {
    ASSERT_EQ(level->as_array().size(), 2u) << "level " << i;
    EXPECT_EQ(level->elements[0].as_integer(), i);
    level = &level->elements[1];
  }
  EXPECT_EQ(level->as_string(), "leaf");
}

TEST(ReplyBuilder, AReplySplitAcrossTwoFeedsComesOutWhenComplete) {
  Reader reader;
  reader.feed("*3\r\n$5\r\nhello\r\n*2\r\n:7\r\n$6\r\nwor");
  EXPECT_EQ(reader.next(), nullptr);
  reader.feed("ld!\r\n+OK\r\n");
  const WholeReply whole = reader.next();
  ASSERT_NE(whole, nullptr);
  const Reply& reply = built_reply(whole.get());
  ASSERT_EQ(reply.as_array().size(), 3u);
  EXPECT_EQ(reply.elements[0].as_string(), "hello");
  ASSERT_EQ(reply.elements[1].as_array().size(), 2u);
  EXPECT_EQ(reply.elements[1].elements[0].as_integer(), 7);
  EXPECT_EQ(reply.elements[1].elements[1].as_string(), "world!");
  EXPECT_EQ(reply.elements[2].type, Reply::Type::status);
  EXPECT_EQ(reader.next(), nullptr);
}

TEST(ReplyBuilder, RepliesInOneFeedComeOutOneByOneInOrder) {
  Reader reader;
  reader.feed("+PONG\r\n:5\r\n$1\r\nx\r\n");
  EXPECT_EQ(built_reply(reader.next().get()).str, "PONG");
  EXPECT_EQ(built_reply(reader.next().get()).integer, 5);
  EXPECT_EQ(built_reply(reader.next().get()).str, "x");
  EXPECT_EQ(reader.next(), nullptr);
}

// The partial replies below are freed by the reader through reply_builder()'s freeObject; a
// leak or a double free would fail these tests under AddressSanitizer.

TEST(ReplyBuilder, AProtocolErrorFreesThePartialReply) {
  Reader reader;
  reader.feed("*3\r\n$5\r\nhello\r\n*2\r\n:1\r\n");
  EXPECT_EQ(reader.next(), nullptr);
  reader.feed("@oops\r\n");
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(&reader.hiredis(), &reply), REDIS_ERR);
  EXPECT_EQ(reply, nullptr);
  EXPECT_EQ(reader.hiredis().err, REDIS_ERR_PROTOCOL);
  EXPECT_EQ(reader.hiredis().reply, nullptr);
}

TEST(ReplyBuilder, NestingBeyondWhatHiredisReadsIsAnErrorThatFreesThePartialReply) {
  Reader reader;
  reader.feed(nested_arrays(deepest_nesting + 1));
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(&reader.hiredis(), &reply), REDIS_ERR);
  EXPECT_EQ(reply, nullptr);
  EXPECT_EQ(reader.hiredis().err, REDIS_ERR_PROTOCOL);
}

TEST(ReplyBuilder, AReaderFreedMidReplyFreesThePartialReply) {
  Reader reader;
  reader.feed("*2\r\n*2\r\n$300\r\n" + std::string(300, 'y') + "\r\n");
  EXPECT_EQ(reader.next(), nullptr);
  EXPECT_NE(reader.hiredis().reply, nullptr);
}

TEST(ReplyBuilder, HiredisReadsTheTypeAndTextOfAWholeReplyAsItsOwn) {
  // redisProcessCallbacks reads a reply that no callback waits for as a redisReply.
  Reader reader;
  reader.feed("-ERR max number of clients reached\r\n:12\r\n*1\r\n:1\r\n");
  const WholeReply error = reader.next();
  const auto& seen_error = *static_cast<const redisReply*>(error.get());
  EXPECT_EQ(seen_error.type, REDIS_REPLY_ERROR);
  EXPECT_STREQ(seen_error.str, "ERR max number of clients reached");
  EXPECT_EQ(seen_error.len, std::string_view("ERR max number of clients reached").size());
  const WholeReply integer = reader.next();
  EXPECT_EQ(static_cast<const redisReply*>(integer.get())->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(static_cast<const redisReply*>(integer.get())->integer, 12);
  const WholeReply array = reader.next();
  EXPECT_EQ(static_cast<const redisReply*>(array.get())->type, REDIS_REPLY_ARRAY);
}

}  // namespace
}  // namespace redlimit::detail
