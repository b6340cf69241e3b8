#include "loop_watch.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace redlimit_server {
namespace {

int checked(int result, const char* what) {
  if (result < 0) throw std::system_error(errno, std::generic_category(), what);
  return result;
}

/// Watches `fd` for input once: until the next rearm, its readiness wakes nobody.
void watch_once(int epoll_fd, int fd, int operation) {
  epoll_event event{};
  event.events = EPOLLIN | EPOLLONESHOT;
  event.data.fd = fd;
  checked(epoll_ctl(epoll_fd, operation, fd, &event), "epoll_ctl");
}

/// Whether `loop` has watchers that its next poll registers with the kernel first. Why the
/// private field: libuv registers a watcher started or changed in an I/O callback only at its
/// next poll (uv__io_poll() drains watcher_queue first), and no public call tells whether one
/// waits; an empty queue's head points to itself.
bool has_unregistered_watchers(const uv_loop_t* loop) {
  return loop->watcher_queue[0] != static_cast<const void*>(&loop->watcher_queue);
}

}  // namespace

void run_ready(uv_loop_t* loop) {
  do {
    uv_run(loop, UV_RUN_NOWAIT);
  } while (has_unregistered_watchers(loop));
}

LoopWatch::LoopWatch(uv_loop_t* loop, std::function<void()> ready)
    : ready_(std::move(ready)), loop_fd_(uv_backend_fd(loop)) {
  epoll_fd_ = checked(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  try {
    stop_fd_ = checked(eventfd(0, EFD_CLOEXEC), "eventfd");
    epoll_event stop{};
    stop.events = EPOLLIN;
    stop.data.fd = stop_fd_;
    checked(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &stop), "epoll_ctl");
    watch_once(epoll_fd_, loop_fd_, EPOLL_CTL_ADD);
    thread_ = std::thread([this] { watch(); });
  } catch (...) {
    if (stop_fd_ >= 0) close(stop_fd_);
    close(epoll_fd_);
    throw;
  }
}

LoopWatch::~LoopWatch() {
  const std::uint64_t one = 1;
  // Why no check: an eventfd's counter takes this write; the thread wakes on it.
  [[maybe_unused]] const ssize_t written = write(stop_fd_, &one, sizeof one);
  thread_.join();
  close(stop_fd_);
  close(epoll_fd_);
}

void LoopWatch::rearm() {
  watch_once(epoll_fd_, loop_fd_, EPOLL_CTL_MOD);
}

void LoopWatch::watch() {
  for (;;) {
    epoll_event events[2];
    const int count = epoll_wait(epoll_fd_, events, 2, -1);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return;
    bool loop_ready = false;
    for (int i = 0; i < count; ++i) {
      if (events[i].data.fd == stop_fd_) return;
      loop_ready = true;
    }
    if (loop_ready) ready_();
  }
}

}  // namespace redlimit_server
