#include "redis/sigpipe_guard.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace redlimit::detail {
namespace {

TEST(SigpipeGuard, AWriteToAClosedSocketFailsWithEpipeInsteadOfKillingTheProcess) {
  ASSERT_FALSE(sigpipe_ignored()) << "this test needs SIGPIPE at its default (terminate)";
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  ssize_t written = 0;
  int error = 0;
  {
    SigpipeGuard guard(true);
    written = write(fds[0], "x", 1);
    error = errno;
  }
  close(fds[0]);
  EXPECT_EQ(written, -1);
  EXPECT_EQ(error, EPIPE);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the SIGPIPE must be consumed, not left pending";
}

TEST(SigpipeGuard, RestoresTheThreadSignalMask) {
  sigset_t before;
  sigset_t after;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  { SigpipeGuard guard(true); }
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&before, SIGPIPE), sigismember(&after, SIGPIPE));
}

}  // namespace
}  // namespace redlimit::detail
