#include <gtest/gtest.h>

#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

TEST(Rate, ParsesPermitsPerUnit) {
  EXPECT_EQ(Rate::parse("400/s"), (Rate{400, 1s}));
  EXPECT_EQ(Rate::parse("100/min"), (Rate{100, 1min}));
  EXPECT_EQ(Rate::parse("100/m"), (Rate{100, 1min}));
  EXPECT_EQ(Rate::parse("5000/h"), (Rate{5000, 1h}));
  EXPECT_EQ(Rate::parse("1/day"), (Rate{1, 24h}));
  EXPECT_EQ(Rate::parse("1/d"), (Rate{1, 24h}));
  EXPECT_EQ(Rate::parse("3/us"), (Rate{3, 1us}));
}

TEST(Rate, ParsesACountBeforeTheUnit) {
  EXPECT_EQ(Rate::parse("5/250ms"), (Rate{5, 250ms}));
  EXPECT_EQ(Rate::parse("7/3s"), (Rate{7, 3s}));
  EXPECT_EQ(Rate::parse("10/15min"), (Rate{10, 15min}));
}

TEST(Rate, RejectsAnythingElseWithInvalidArgument) {
  for (const char* text : {"inf",         "nan",
                           "0x10",        " 12 ",
                           "12",          "10/0s",
                           "-5/s",        "+5/s",
                           "5/lightyear", "5/",
                           "/s",          "0/s",
                           "5/ s",        "5/s ",
                           "1e3/s",       "5.5/s",
                           "5/1.5s",      "99999999999999999999/s",
                           "5/-1s",       "5/9999999999999999d"}) {
    EXPECT_THROW(Rate::parse(text), InvalidArgument) << text;
  }
}

TEST(Rate, ErrorsQuoteTheTextAndTheExpectedForm) {
  try {
    Rate::parse("5/lightyear");
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("5/lightyear"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown unit 'lightyear'"), std::string::npos) << message;
  }
}

TEST(Rate, PrintsInTheLargestWholeUnit) {
  EXPECT_EQ(to_string(Rate{400, 1s}), "400/1s");
  EXPECT_EQ(to_string(Rate{5, 250ms}), "5/250ms");
  EXPECT_EQ(to_string(Rate{1, 24h}), "1/1d");
  EXPECT_EQ(to_string(Rate{7, 3s}), "7/3s");
  EXPECT_EQ(to_string(Rate{1, 1500us}), "1/1500us");
}

}  // namespace
}  // namespace redlimit
