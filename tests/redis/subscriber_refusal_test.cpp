// A subscriber whose SUBSCRIBE the server refuses (an ACL user without +subscribe or without the
// channel pattern, a missing password, a server at maxclients) backs off like any failed
// connection, logs once per change of state, and subscribes again once allowed; and a server at
// maxclients is a transient fault that the failure policy answers.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redis/endpoint.hpp"
#include "redis/subscriber.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/acl_line.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view channel = "rl:{sms:key}:cancelled";

std::size_t count(const std::string& text, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

/// The value of `field` in an INFO text ("total_connections_received").
long long info_field(const std::string& info, const std::string& field) {
  const std::string marker = field + ":";
  const auto at = info.find(marker);
  if (at == std::string::npos) throw std::runtime_error("INFO has no " + field);
  return std::stoll(info.substr(at + marker.size()));
}

/// A raw TCP connection to the server that holds one of its client slots and can ask it for
/// INFO stats when no other connection would be accepted.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("cannot connect to the test server");
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  /// The reply to INFO stats (a bulk string), read whole.
  std::string info_stats() {
    const std::string request = "INFO stats\r\n";
    if (::write(fd_, request.data(), request.size()) != static_cast<ssize_t>(request.size()))
      throw std::runtime_error("cannot write INFO");
    std::string in;
    char buffer[4096];
    for (;;) {
      const auto header_end = in.find("\r\n");
      if (header_end != std::string::npos && in[0] == '$') {
        const auto length = std::stoull(in.substr(1, header_end - 1));
        if (in.size() >= header_end + 2 + length) return in.substr(header_end + 2, length);
      }
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0) throw std::runtime_error("the server closed the raw connection: " + in);
      in.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
};

/// What a subscriber did while refused and after it was allowed again.
struct Observed {
  long long attempts_while_refused = 0;
  bool subscribed_again = false;
};

/// Subscribes, lets the server refuse for `refused_for`, counts the attempts meanwhile, then
/// lifts the refusal and waits (up to 5 s) for the confirmation.
Task<void> refused_then_allowed(uv_loop_t* loop, detail::Subscriber& subscriber,
                                std::chrono::milliseconds refused_for,
                                std::function<long long()> attempts_so_far,
                                std::function<void()> allow, Observed* out) {
  const long long before = attempts_so_far();
  const auto ignore = [](std::string_view) {};
  const std::uint64_t id = subscriber.subscribe(std::string(channel), ignore);
  co_await sleep_for(loop, refused_for);
  out->attempts_while_refused = attempts_so_far() - before;
  allow();
  try {
    co_await subscriber.confirmed(std::string(channel), Clock::now() + 5s);
    out->subscribed_again = true;
  } catch (const TimeoutError&) {
  }
  subscriber.unsubscribe(id);
  co_await subscriber.close();
}

class SubscriberRefusal : public test::LoopTest {
 protected:
  /// Runs the scenario against the server at `url` and checks the bounds: with the
  /// default backoff (50 ms doubling to 2 s) 3 s hold about 7 attempts, the storm 15,000 or more.
  void expect_backoff_and_one_warning(const std::string& url,
                                      std::function<long long()> attempts_so_far,
                                      std::function<void()> allow) {
    detail::Subscriber subscriber(loop(), {detail::parse_redis_url(url)},
                                  detail::ConnectionSettings{}, logger_);
    Observed seen;
    run(loop(), refused_then_allowed(loop(), subscriber, 3000ms, std::move(attempts_so_far),
                                     std::move(allow), &seen));
    std::printf("[ refused 3 s ] %lld connection attempts\n", seen.attempts_while_refused);
    // Why a prefix: the storm this guards against logs thousands of lines.
    const std::string log = log_.str().substr(0, 3000);
    EXPECT_GE(seen.attempts_while_refused, 2) << "it keeps trying";
    EXPECT_LE(seen.attempts_while_refused, 30) << "backoff, no reconnect storm";
    EXPECT_TRUE(seen.subscribed_again) << log;
    EXPECT_EQ(count(log_.str(), "[warning]"), 1u) << "one warning when refusals start:\n" << log;
    EXPECT_EQ(count(log_.str(), "subscribed again"), 1u) << "one line when it subscribes again:\n"
                                                         << log;
  }

  std::function<long long()> connections_received(test::RedisServer& server) {
    return [&server] {
      // Minus 1: the INFO connection itself.
      return info_field(server.command({"INFO", "stats"}).as_string(),
                        "total_connections_received") -
             1;
    };
  }

  test::RedisServer server_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> logger_ = std::make_shared<spdlog::logger>(
      "redlimit-test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_));
};

std::string url_for(const std::string& user, const test::RedisServer& server) {
  return "redis://" + user + ":pw@127.0.0.1:" + std::to_string(server.port());
}

TEST_F(SubscriberRefusal, AnAclUserWithoutSubscribeBacksOffAndLogsOncePerChangeOfState) {
  server_.command({"ACL", "SETUSER", "u", "reset", "on", ">pw", "~rl:*", "resetchannels", "&rl:*",
                   "+@all", "-subscribe"});
  test::RedisServer& server = server_;
  expect_backoff_and_one_warning(url_for("u", server_), connections_received(server_), [&server] {
    server.command({"ACL", "SETUSER", "u", "+subscribe"});
  });
}

TEST_F(SubscriberRefusal, AnAclUserWithoutTheChannelPatternBacksOffAndLogsOncePerChangeOfState) {
  server_.command({"ACL", "SETUSER", "u", "reset", "on", ">pw", "~rl:*", "resetchannels", "+@all"});
  test::RedisServer& server = server_;
  expect_backoff_and_one_warning(url_for("u", server_), connections_received(server_), [&server] {
    server.command({"ACL", "SETUSER", "u", "&rl:*"});
  });
}

TEST_F(SubscriberRefusal, AMissingPasswordBacksOffAndLogsOncePerChangeOfState) {
  test::RedisServer secured({"--requirepass", "pw"});
  expect_backoff_and_one_warning("redis://127.0.0.1:" + std::to_string(secured.port()),
                                 connections_received(secured), [&secured] {
                                   secured.command({"CONFIG", "SET", "requirepass", ""});
                                 });
}

TEST_F(SubscriberRefusal, AServerAtMaxclientsBacksOffAndLogsOncePerChangeOfState) {
  test::RedisServer full({"--maxclients", "2"});
  auto fillers = std::make_shared<std::vector<std::unique_ptr<RawConnection>>>();
  fillers->push_back(std::make_unique<RawConnection>(full.port()));
  fillers->push_back(std::make_unique<RawConnection>(full.port()));
  // Why INFO over a filler: every other connection is refused while the server is full.
  const auto rejected = [fillers] {
    return info_field(fillers->front()->info_stats(), "rejected_connections");
  };
  expect_backoff_and_one_warning(full.url(), rejected, [fillers] { fillers->clear(); });
}

// ---- waiting and following without notices

/// The least-privilege user of docs/operations.md, following stored policies, without
/// SUBSCRIBE: every call works, no notice ever arrives.
class WithoutSubscribe : public test::LoopTest {
 protected:
  WithoutSubscribe() {
    std::vector<std::string> line = test::words(test::acl_setuser);
    for (const std::string& rule : test::words(test::acl_follow_rules))
      line.push_back(rule);
    line.push_back("-subscribe");
    server_.command(line);
  }
  void TearDown() override {
    run(loop(), client_.close());
    run(loop(), admin_.close());
    LoopTest::TearDown();
  }

  test::RedisServer server_;
  std::shared_ptr<spdlog::logger> quiet_ = std::make_shared<spdlog::logger>("quiet");
  Client client_{loop(),
                 {.url = "redis://redlimit:change-me@127.0.0.1:" + std::to_string(server_.port()),
                  .logger = quiet_}};
  Client admin_{loop(), {.url = server_.url(), .logger = quiet_}};
};

/// How one waiting acquire() ended.
struct Waited {
  std::optional<Decision> decision;
  bool cancelled = false;
  Clock::time_point at;
};

Task<void> wait_for(Limiter& limiter, std::stop_token stop, Waited* out) {
  try {
    out->decision = co_await limiter.acquire("key", 1, {.stop = stop});
  } catch (const Cancelled&) {
    out->cancelled = true;
  }
  out->at = Clock::now();
}

Task<void> cancel_the_first_of_two_waiters(uv_loop_t* loop, Limiter& limiter,
                                           Clock::time_point* start, Waited* first,
                                           Waited* second) {
  *start = Clock::now();
  co_await limiter.try_acquire("key");
  std::stop_source stop_first;
  TaskGroup group;
  group.add(wait_for(limiter, stop_first.get_token(), first));  // slot 200 ms
  group.add(wait_for(limiter, {}, second));                     // slot 400 ms
  co_await sleep_for(loop, 50ms);
  stop_first.request_stop();
  co_await group.join();
}

TEST_F(WithoutSubscribe, AWaiterBehindACancelledOneStillCompletesAtItsOwnSlot) {
  Limiter limiter(client_, Policy::of({Algorithm::gcra, {5, 1s}, 1}),
                  {.name = "queue"});  // a slot every 200 ms
  Clock::time_point start;
  Waited first, second;
  run(loop(), cancel_the_first_of_two_waiters(loop(), limiter, &start, &first, &second));
  EXPECT_TRUE(first.cancelled);
  ASSERT_TRUE(second.decision);
  EXPECT_TRUE(second.decision->allowed);
  // No notice moves it to 200 ms; nothing else may keep it past its own 400 ms.
  EXPECT_GE(second.at - start, 350ms);
  EXPECT_LT(second.at - start, 400ms + 1s);
}

/// Four waiters of a process that hears notices, one behind them of a process that does not (the
/// fixture's client), the four cancelled; once the deaf waiter is admitted, the other process
/// asks for the whole burst. Every admission goes to `admits`.
Task<void> cancel_four_ahead_of_a_deaf_waiter(uv_loop_t* loop, Limiter& hearing, Limiter& deaf,
                                              std::vector<test::Admit>* admits) {
  const auto admit = [admits](const Decision& d, std::int64_t permits) {
    if (d.allowed) admits->push_back({.time_us = d.server_time_us, .permits = permits});
  };
  admit(co_await hearing.try_acquire("key", 2), 2);  // then a slot every 100 ms
  std::stop_source stop_ahead;
  TaskGroup group;
  std::vector<Waited> ahead(4);
  for (Waited& waiter : ahead)
    group.add(wait_for(hearing, stop_ahead.get_token(), &waiter));  // slots 100 to 400 ms
  co_await sleep_for(loop, 20ms);
  Waited behind;
  group.add(wait_for(deaf, {}, &behind));  // slot 500 ms
  co_await sleep_for(loop, 30ms);
  stop_ahead.request_stop();  // its slot moves to now: nobody tells it
  co_await group.join();
  for (const Waited& waiter : ahead) {
    if (waiter.decision) admit(*waiter.decision, 1);
  }
  if (behind.decision) admit(*behind.decision, 1);
  admit(co_await hearing.try_acquire("key", 2), 2);
}

// Bug (found by the chaos suite, under the sanitizers): a waiter that missed the notice of a
// cancellation ahead of it was admitted at its unmoved slot, while Redis had charged its permit
// at the moved one, long past: the key, idle again by then, gave its whole burst to others at
// the same moment. The decisions' Redis times broke the limit.
TEST_F(WithoutSubscribe, AWaiterThatMissedACancellationAheadOfItNeverBreaksTheLimit) {
  const Limit limit = Limit::gcra("10/s", 2);
  Limiter hearing(admin_, Policy::of(limit), {.name = "queue"});
  Limiter deaf(client_, Policy::of(limit), {.name = "queue"});
  std::vector<test::Admit> admits;
  run(loop(), cancel_four_ahead_of_a_deaf_waiter(loop(), hearing, deaf, &admits));
  ASSERT_GE(admits.size(), 2u) << "the first burst and the deaf waiter";
  const test::CheckResult check = test::check_admits(limit, admits);
  EXPECT_TRUE(check) << check.description;
}

/// The hearing process takes the burst and reserves the next slot (2 s on); the deaf waiter
/// reserves the one after (4 s on). The one ahead is cancelled while the deaf process may not
/// subscribe; then its user may.
Task<void> cancel_ahead_then_allow_subscribing(uv_loop_t* loop, Limiter& hearing, Limiter& deaf,
                                               test::RedisServer& server, Clock::time_point* start,
                                               Decision* burst, Waited* ahead, Waited* behind) {
  *start = Clock::now();
  *burst = co_await hearing.try_acquire("key");
  std::stop_source stop_ahead;
  TaskGroup group;
  group.add(wait_for(hearing, stop_ahead.get_token(), ahead));
  co_await sleep_for(loop, 20ms);
  group.add(wait_for(deaf, {}, behind));
  co_await sleep_for(loop, 80ms);
  stop_ahead.request_stop();  // the deaf waiter's slot moves to 2 s: it cannot hear it
  co_await sleep_for(loop, 100ms);
  server.command({"ACL", "SETUSER", "redlimit", "+subscribe"});
  co_await group.join();
}

// Bug (found in review of the semaphore's twin): a waiter whose subscription was confirmed only
// after a cancellation ahead of it had moved its slot slept to its old slot, found there that it
// stood elsewhere, and reserved again at the back of the queue.
TEST_F(WithoutSubscribe,
       AWaiterWhoseSubscriptionIsConfirmedLateAsksWhereItStandsAndUsesTheSlotItMovedTo) {
  const Limit limit = Limit::gcra({1, 2s}, 1);
  Limiter hearing(admin_, Policy::of(limit), {.name = "queue"});
  Limiter deaf(client_, Policy::of(limit), {.name = "queue"});
  Clock::time_point start;
  Decision burst;
  Waited ahead, behind;
  run(loop(), cancel_ahead_then_allow_subscribing(loop(), hearing, deaf, server_, &start, &burst,
                                                  &ahead, &behind));
  EXPECT_TRUE(ahead.cancelled);
  ASSERT_TRUE(burst.allowed);
  ASSERT_TRUE(behind.decision);
  ASSERT_TRUE(behind.decision->allowed);
  const test::CheckResult check =
      test::check_admits(limit, {{.time_us = burst.server_time_us, .permits = 1},
                                 {.time_us = behind.decision->server_time_us, .permits = 1}});
  EXPECT_TRUE(check) << check.description;
  const auto waited = behind.at - start;
  EXPECT_GE(waited, 1900ms) << "no earlier than the slot it moved to";
  EXPECT_LT(waited, 3s) << "at the slot it moved to (2 s), not at its own (4 s)";
}

TEST_F(WithoutSubscribe, AFollowerStillFollowsAChangeWithinThePolicyRefresh) {
  PolicyStore store(admin_);
  run(loop(), store.set("api", Policy::parse("gcra 1/min")));
  Limiter limiter(client_, LimiterOptions{.name = "api", .policy_refresh = 200ms});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
  const std::int64_t version = run(loop(), store.record("api"))->version;
  const auto changed = Clock::now();
  while (run(loop(), limiter.peek("k")).policy_version != version && Clock::now() - changed < 5s)
    run(loop(), sleep_for(loop(), 5ms));
  const auto took = Clock::now() - changed;
  std::printf("[ no notices ] a change reached the follower in %.0f ms (refresh 200 ms)\n",
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_LT(took, 200ms + 500ms);
}

// ---- a server at maxclients, seen by calls

/// How the calls made against a full server ended.
struct Answers {
  int calls = 0;
  int by_policy = 0;  ///< answered by the failure policy (the expected source)
  int allowed = 0;
  int thrown = 0;
  std::string last_thrown;
};

Task<void> call_for(uv_loop_t* loop, Limiter& limiter, Source expected,
                    std::chrono::milliseconds duration, Answers* out) {
  const auto end = Clock::now() + duration;
  while (Clock::now() < end) {
    ++out->calls;
    try {
      const Decision d = co_await limiter.try_acquire("key");
      if (d.source == expected) ++out->by_policy;
      if (d.allowed) ++out->allowed;
    } catch (const std::exception& e) {
      ++out->thrown;
      out->last_thrown = e.what();
    }
    co_await sleep_for(loop, 5ms);
  }
}

class FullServer : public test::LoopTest,
                   public ::testing::WithParamInterface<FailurePolicy::Kind> {
 protected:
  FullServer() {
    fillers_.push_back(std::make_unique<RawConnection>(full_.port()));
    fillers_.push_back(std::make_unique<RawConnection>(full_.port()));
  }

  test::RedisServer full_{{"--maxclients", "2"}};
  std::vector<std::unique_ptr<RawConnection>> fillers_;
};

TEST_P(FullServer, MaxclientsAtTheHandshakeIsAnsweredByTheFailurePolicy) {
  Client client(loop(), {.url = full_.url(), .logger = std::make_shared<spdlog::logger>("quiet")});
  LimiterOptions options{.name = "sms"};
  options.on_failure.kind = GetParam();
  Limiter limiter(client, Policy::of({Algorithm::gcra, {100, 1s}}), options);
  const Source expected =
      GetParam() == FailurePolicy::fail_open ? Source::fail_open : Source::fail_closed;
  Answers seen;
  run(loop(), call_for(loop(), limiter, expected, 1000ms, &seen));
  std::printf("[ maxclients ] %d calls: %d by the failure policy, %d threw\n", seen.calls,
              seen.by_policy, seen.thrown);
  EXPECT_EQ(seen.thrown, 0) << seen.last_thrown;
  EXPECT_EQ(seen.by_policy, seen.calls);
  EXPECT_EQ(seen.allowed, GetParam() == FailurePolicy::fail_open ? seen.calls : 0);
  run(loop(), client.close());
}

std::string policy_name(const ::testing::TestParamInfo<FailurePolicy::Kind>& info) {
  return info.param == FailurePolicy::fail_open ? "fail_open" : "fail_closed";
}

INSTANTIATE_TEST_SUITE_P(Policies, FullServer,
                         ::testing::Values(FailurePolicy::fail_open, FailurePolicy::fail_closed),
                         policy_name);

// ---- the other transient replies at the connection setup

/// A peer on a free loopback port that answers the first bytes of every connection with one
/// error reply and closes it, as a server that cannot serve yet does during the setup.
class RefusingPeer {
 public:
  explicit RefusingPeer(std::string error) : reply_("-" + std::move(error) + "\r\n") {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~RefusingPeer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  RefusingPeer(const RefusingPeer&) = delete;
  RefusingPeer& operator=(const RefusingPeer&) = delete;

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    while (!stop_) {
      pollfd ready{.fd = listener_, .events = POLLIN, .revents = 0};
      if (::poll(&ready, 1, 20) <= 0) continue;
      const int peer = ::accept(listener_, nullptr, nullptr);
      if (peer < 0) continue;
      char buffer[512];
      if (::read(peer, buffer, sizeof buffer) > 0) {
        [[maybe_unused]] const auto sent = ::write(peer, reply_.data(), reply_.size());
      }
      ::close(peer);
    }
  }

  std::string reply_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class TransientSetupReply : public test::LoopTest,
                            public ::testing::WithParamInterface<std::string> {};

Task<void> expect_unavailable(Client& client) {
  try {
    co_await client.command("PING");
    ADD_FAILURE() << "the setup was refused";
  } catch (const Unavailable&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an Unavailable: " << e.what();
  }
}

TEST_P(TransientSetupReply, IsUnavailableAndAnsweredByTheFailurePolicy) {
  RefusingPeer peer(GetParam());
  Client client(loop(), {.url = peer.url(), .logger = std::make_shared<spdlog::logger>("quiet")});
  run(loop(), expect_unavailable(client));
  LimiterOptions options{.name = "sms"};
  options.on_failure.kind = FailurePolicy::fail_open;
  Limiter limiter(client, Policy::of({Algorithm::gcra, {100, 1s}}), options);
  Answers seen;
  run(loop(), call_for(loop(), limiter, Source::fail_open, 200ms, &seen));
  EXPECT_EQ(seen.thrown, 0) << seen.last_thrown;
  EXPECT_EQ(seen.by_policy, seen.calls);
  run(loop(), client.close());
}

INSTANTIATE_TEST_SUITE_P(Replies, TransientSetupReply,
                         ::testing::Values("ERR max number of clients reached",
                                           "LOADING Redis is loading the dataset in memory",
                                           "BUSY Redis is busy running a script.",
                                           "MASTERDOWN Link with MASTER is down"));

}  // namespace
}  // namespace redlimit
