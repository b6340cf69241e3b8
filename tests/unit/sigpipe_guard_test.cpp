#include "redis/sigpipe_guard.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

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
    if (written < 0) guard.write_failed();
  }
  close(fds[0]);
  EXPECT_EQ(written, -1);
  EXPECT_EQ(error, EPIPE);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the SIGPIPE must be consumed, not left pending";
}

TEST(SigpipeGuard, ASigpipeAlreadyPendingForTheThreadIsLeftAlone) {
  sigset_t only_sigpipe;
  sigemptyset(&only_sigpipe);
  sigaddset(&only_sigpipe, SIGPIPE);
  sigset_t before;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &only_sigpipe, &before), 0);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);  // the application's own, blocked
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  {
    SigpipeGuard guard(true);
    if (write(fds[0], "x", 1) < 0) guard.write_failed();
  }
  close(fds[0]);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 1) << "the application's SIGPIPE must stay pending";
  const timespec no_wait{0, 0};
  sigtimedwait(&only_sigpipe, nullptr, &no_wait);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
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
