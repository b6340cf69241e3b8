#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace redlimit::test {

/// A scripted sentinel on a free loopback port, served by a thread: it answers PING, SENTINEL
/// get-master-addr-by-name with the address it is told (for any name), and SUBSCRIBE with a
/// confirmation; anything else with an error. For what real sentinels do not do on demand, such
/// as naming a replica as the primary.
class FakeSentinel {
 public:
  /// Names 127.0.0.1:`port` as the primary.
  explicit FakeSentinel(int port);
  ~FakeSentinel();
  FakeSentinel(const FakeSentinel&) = delete;
  FakeSentinel& operator=(const FakeSentinel&) = delete;

  /// Names 127.0.0.1:`port` from now on.
  void name_primary(int port);
  /// Names 127.0.0.1:`port` from now on and announces it on +switch-master, as the primary
  /// "mymaster" moved from the port it named before, to every connection subscribed to it.
  void switch_primary(int port);
  /// From now on reads, answers and accepts nothing, and announces nothing, keeping its
  /// connections open: a sentinel stopped by SIGSTOP, or one whose host stalls.
  /// Returns once the serving thread has stalled: no question asked before is answered after.
  void stall();
  /// SENTINEL get-master-addr-by-name questions answered so far.
  int questions() const { return questions_.load(); }
  int port() const { return port_; }

 private:
  void serve();
  /// The answers to the whole commands at the start of `received` (removed from it); sets
  /// `subscribed` if one of them was SUBSCRIBE.
  std::string answer(std::string& received, bool& subscribed);

  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> primary_port_;
  std::atomic<int> questions_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stall_seen_{false};  ///< serve() has stopped answering
  /// The +switch-master message switch_primary() asked for, until serve() sends it.
  std::mutex announcement_mutex_;
  std::string announcement_;
  std::thread thread_;
};

}  // namespace redlimit::test
