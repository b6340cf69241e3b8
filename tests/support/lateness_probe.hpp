#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace redlimit::test {

/// How late this machine runs things while a timing check is measured: a thread sleeps 2 ms
/// again and again and notes how much longer each sleep took, and, given a Redis port, also
/// times a PING to that server each turn (the server is scheduled like any process); and the
/// thread that made the probe (the test's loop) has its own time spent ready but waiting for a
/// CPU counted by the kernel. A check of "ended by its wake plus slack" adds what the machine's
/// load cost, measured in the same run, so that it fails for a late library, not for a busy
/// machine.
class LatenessProbe {
 public:
  explicit LatenessProbe(std::optional<int> redis_port = std::nullopt);
  LatenessProbe(const LatenessProbe&) = delete;
  LatenessProbe& operator=(const LatenessProbe&) = delete;
  ~LatenessProbe();

  /// Stops the PINGs, once the one in flight is answered: before a test stops its server on
  /// purpose (that wait is not the machine's).
  void stop_pinging();
  /// The longest delay seen so far: an oversleep, or a PING's round trip.
  std::chrono::microseconds worst() const;
  /// How long the thread that made the probe has waited for a CPU since then (0 where the
  /// kernel does not tell: no /proc/<pid>/task/<tid>/schedstat).
  std::chrono::microseconds waited_for_a_cpu() const;
  /// deadline_slack, plus twice the worst delay (a waiter's end goes through a timer and a
  /// reply, each of which the load may delay), plus waited_for_a_cpu().
  std::chrono::microseconds slack() const;

 private:
  void measure(std::optional<int> redis_port);

  std::atomic<bool> stopping_{false};
  std::atomic<bool> pinging_{true};
  std::mutex ping_;  ///< held while a PING is in flight
  std::atomic<std::int64_t> worst_us_{0};
  std::string schedstat_;  ///< the schedstat file of the thread that made the probe
  std::chrono::nanoseconds run_delay_at_start_;
  std::thread thread_;
};

}  // namespace redlimit::test
