// CallArenas: a call's messages come empty from the pool, and a released arena serves the next
// call.
#include "call_arenas.hpp"

#include <gtest/gtest.h>

namespace redlimit_server {
namespace {

TEST(CallArenas, AReleasedArenaServesTheNextCallWithEmptyMessages) {
  CallArenas arenas;
  auto* first = arenas.AllocateMessages();
  first->request()->set_domain("a domain longer than a short string's own buffer");
  first->request()->add_descriptors()->add_entries()->set_key("user");
  first->response()->add_statuses()->set_limit_remaining(7);
  first->response()->add_response_headers_to_add()->set_value(std::string(4096, 'x'));
  auto* second = arenas.AllocateMessages();
  EXPECT_NE(second, first);
  EXPECT_EQ(arenas.made(), 2u);

  first->Release();
  auto* third = arenas.AllocateMessages();
  EXPECT_EQ(third, first) << "the released one, not a new one";
  EXPECT_EQ(arenas.made(), 2u);
  EXPECT_EQ(third->request()->domain(), "");
  EXPECT_EQ(third->request()->descriptors_size(), 0);
  EXPECT_EQ(third->response()->statuses_size(), 0);
  EXPECT_EQ(third->response()->response_headers_to_add_size(), 0);
  EXPECT_EQ(third->request()->GetArena(), third->response()->GetArena());
  EXPECT_NE(third->request()->GetArena(), nullptr);
  second->Release();
  third->Release();
}

}  // namespace
}  // namespace redlimit_server
