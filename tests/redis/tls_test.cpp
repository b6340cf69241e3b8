// rediss://: every call over TLS to Debian's redis-server serving TLS only (`--port 0`), the
// server's certificate verified (its CA, its name, its dates), mutual TLS, and each way the
// handshake can fail, as a typed error well before the connect timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/tls_redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Tls : public test::LoopTest {
 protected:
  /// Options for `server`, trusting the test CA; a long connect timeout, so that a failure
  /// that comes fast cannot be the timeout's.
  static ClientOptions options_for(const test::TlsRedisServer& server) {
    ClientOptions options;
    options.url = server.url();
    options.connect_timeout = 5s;
    options.command_timeout = 5s;
    options.tls.ca_file = server.certificates().ca;
    return options;
  }

  /// What a PING through a client with `options` fails with (its message), and how long it
  /// took; "no error" when it succeeds.
  struct Outcome {
    std::string error;
    std::string type;
    Clock::duration took{};
  };
  Outcome ping(ClientOptions options) {
    Client client(loop(), std::move(options));
    Outcome outcome{"no error", "", {}};
    const auto started = Clock::now();
    try {
      run(loop(), client.command("PING"));
    } catch (const TlsError& e) {
      outcome = {e.what(), "TlsError", {}};
    } catch (const std::exception& e) {
      outcome = {e.what(), "other", {}};
    }
    outcome.took = Clock::now() - started;
    run(loop(), client.close());
    return outcome;
  }
};

Task<void> decide_and_wait(Limiter& limiter, Decision* first, Decision* waited) {
  *first = co_await limiter.try_acquire("user");
  // A reservation, then a wait on a uv timer: the cancellation channel's subscription goes
  // over TLS too.
  *waited = co_await limiter.acquire("user");
}

TEST_F(Tls, ALimiterDecidesAndWaitsOverTls) {
  test::TlsRedisServer server;
  Client client(loop(), options_for(server));
  Limiter limiter(client, Policy::parse("gcra 20/s burst 1"), {.name = "tls"});
  Decision first, waited;
  run(loop(), decide_and_wait(limiter, &first, &waited));
  run(loop(), client.close());
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.source, Source::redis);
  EXPECT_TRUE(waited.allowed);
  // Why in Redis time, not Decision::waited: a busy machine may start the wait well after the
  // first decision.
  EXPECT_GE(waited.server_time_us - first.server_time_us, 50'000) << "not before its slot";
  const std::vector<std::string> keys = server.server().keys();
  EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [](const std::string& key) {
    return key == "rl:{tls:user}:gcra:0";
  })) << "the decisions are in the TLS server";
}

Task<Decision> follow_a_change(Client& client, Limiter& follower) {
  PolicyStore store(client);
  co_await store.set("api", Policy::parse("fixed_window 5/min"));
  co_await follower.try_acquire("k");
  co_await store.set("api", Policy::parse("fixed_window 50/min"));
  // The change's notice comes over the TLS subscription (policy_refresh is an hour).
  for (int i = 0; i < 200; ++i) {
    const Decision decision = co_await follower.try_acquire("k");
    if (decision.limit == 50) co_return decision;
    co_await sleep_for(client.loop(), 10ms);
  }
  co_return co_await follower.try_acquire("k");
}

TEST_F(Tls, AFollowerHearsAPolicyChangeOverTls) {
  test::TlsRedisServer server;
  Client client(loop(), options_for(server));
  Limiter follower(client, LimiterOptions{.name = "api", .policy_refresh = 1h});
  const Decision decision = run(loop(), follow_a_change(client, follower));
  run(loop(), client.close());
  EXPECT_EQ(decision.limit, 50);
}

TEST_F(Tls, APasswordIsSentOverTls) {
  test::TlsRedisServer server({.extra_args = {"--requirepass", "s3cret"}});
  ClientOptions options = options_for(server);
  options.url = "rediss://s3cret@127.0.0.1:" + std::to_string(server.tls_port());
  EXPECT_EQ(ping(options).error, "no error");
  options.url = "rediss://wrong@127.0.0.1:" + std::to_string(server.tls_port());
  const Outcome wrong = ping(options);
  EXPECT_NE(wrong.error.find("WRONGPASS"), std::string::npos) << wrong.error;
}

TEST_F(Tls, TheServersNameIsCheckedAgainstTheCertificate) {
  test::TlsRedisServer server;
  ClientOptions options = options_for(server);
  options.tls.server_name = "redis.test";  // sent as SNI, and checked: the certificate's name
  EXPECT_EQ(ping(options).error, "no error");
  options.tls.server_name = "elsewhere.test";
  const Outcome other = ping(options);
  EXPECT_EQ(other.type, "TlsError") << other.error;
  EXPECT_NE(other.error.find("did not verify"), std::string::npos) << other.error;
}

TEST_F(Tls, AnUnknownCaIsATypedErrorWellBeforeTheTimeout) {
  test::TlsRedisServer server;
  ClientOptions options = options_for(server);
  options.tls.ca_file = server.certificates().other_ca;
  const Outcome outcome = ping(options);
  EXPECT_EQ(outcome.type, "TlsError") << outcome.error;
  EXPECT_NE(outcome.error.find("did not verify"), std::string::npos) << outcome.error;
  EXPECT_LT(outcome.took, 2s);
}

TEST_F(Tls, AnExpiredCertificateIsATypedErrorWellBeforeTheTimeout) {
  test::TlsRedisServer server({.expired_certificate = true});
  const Outcome outcome = ping(options_for(server));
  EXPECT_EQ(outcome.type, "TlsError") << outcome.error;
  EXPECT_NE(outcome.error.find("certificate has expired"), std::string::npos) << outcome.error;
  EXPECT_LT(outcome.took, 2s);
}

TEST_F(Tls, VerifyPeerOffAcceptsAnyCertificate) {
  test::TlsRedisServer server({.expired_certificate = true});
  ClientOptions options = options_for(server);
  options.tls.ca_file = server.certificates().other_ca;
  options.tls.verify_peer = false;
  EXPECT_EQ(ping(options).error, "no error");
}

TEST_F(Tls, MutualTlsTakesTheClientsCertificateAndRefusesNone) {
  test::TlsRedisServer server({.require_client_certificate = true});
  ClientOptions options = options_for(server);
  options.tls.cert_file = server.certificates().client.cert;
  options.tls.key_file = server.certificates().client.key;
  EXPECT_EQ(ping(options).error, "no error");
  const Outcome without = ping(options_for(server));
  EXPECT_EQ(without.type, "TlsError") << without.error;
  EXPECT_LT(without.took, 2s);
}

TEST_F(Tls, APortThatIsNotTlsFailsSayingSo) {
  test::RedisServer plain;
  ClientOptions options;
  options.url = "rediss://127.0.0.1:" + std::to_string(plain.port());
  options.connect_timeout = 1s;
  options.command_timeout = 5s;
  options.tls.verify_peer = false;
  const Outcome outcome = ping(options);
  // A plain Redis answers the TLS hello only when a byte of it happens to end an inline
  // command: then the answer is not TLS (a TlsError at once); else it waits for more, and the
  // attempt times out with the handshake unfinished.
  if (outcome.type != "TlsError") {
    EXPECT_NE(outcome.error.find("TLS handshake"), std::string::npos) << outcome.error;
  }
  EXPECT_LT(outcome.took, 3s);
}

TEST_F(Tls, FilesThatCannotBeUsedAreConfigErrorsAtConstruction) {
  test::TlsRedisServer server;
  const test::TestCertificates& files = server.certificates();
  const auto error_of = [&](TlsOptions tls) -> std::string {
    ClientOptions options = options_for(server);
    options.tls = std::move(tls);
    try {
      Client client(loop(), options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of({.ca_file = "/nonexistent/ca.pem"}).find("/nonexistent/ca.pem"),
            std::string::npos);
  EXPECT_NE(error_of({.ca_file = files.ca, .cert_file = files.client.cert}).find("go together"),
            std::string::npos);
  const std::string mismatched =
      error_of({.ca_file = files.ca, .cert_file = files.client.cert, .key_file = files.server.key});
  EXPECT_NE(mismatched.find("mismatch"), std::string::npos) << mismatched;
  // The same options on a redis:// URL are not read.
  ClientOptions plain = options_for(server);
  plain.url = "redis://127.0.0.1:1";
  plain.tls.ca_file = "/nonexistent/ca.pem";
  Client client(loop(), plain);
  run(loop(), client.close());
}

Task<void> decide_across_a_restart(uv_loop_t* loop, Limiter& limiter, test::RedisServer& server,
                                   Decision* after) {
  co_await limiter.try_acquire("k");
  server.stop();
  server.start();
  for (int i = 0; i < 100; ++i) {
    *after = co_await limiter.try_acquire("k");
    if (after->source == Source::redis) co_return;
    co_await sleep_for(loop, 20ms);
  }
}

TEST_F(Tls, TheClientReconnectsOverTlsAfterTheServerRestarts) {
  test::TlsRedisServer server;
  ClientOptions options = options_for(server);
  options.command_timeout = 250ms;
  Client client(loop(), options);
  Limiter limiter(client, Policy::parse("gcra 100/s"), {.name = "restart"});
  Decision after;
  run(loop(), decide_across_a_restart(loop(), limiter, server.server(), &after));
  run(loop(), client.close());
  EXPECT_EQ(after.source, Source::redis);
  EXPECT_TRUE(after.allowed);
}

}  // namespace
}  // namespace redlimit
