// One process of the waiting test: `count` coroutines each acquire() one permit of a shared
// gcra limit, all at the same wall-clock instant (so that the reservations of every process form
// one queue), and write how each ended to `out`:
//   allowed <server_time_us> <waited_us> <completed_steady_ns> <completed_unix_us>
//   denied <retry_after_us> <waited_us> <source>
//   cancelled <index>
// With cancel_odd = 1, the odd-numbered coroutines are cancelled `cancel_after_ms` after the
// start. A key "a,b" makes each coroutine acquire_all() one permit of each key; a key "a;b"
// makes the even-numbered coroutines acquire() one permit of "a", the odd ones of "b" (so that
// both keys' queues are made in the same loop turns).
//
// usage: waiter <url> <key> <permits> <period_us> <count> <start_unix_us> <max_wait_ms>
//               <cancel_odd> <cancel_after_ms> <out> [<reservation_lease_ms>]
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/task_group.hpp"

namespace {

using namespace std::chrono_literals;

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

redlimit::Task<void> wait_one(redlimit::Limiter& limiter, std::string key,
                              std::chrono::milliseconds max_wait, std::stop_token stop, int index,
                              std::vector<std::string>* lines) {
  try {
    const redlimit::AcquireOptions options{.max_wait = max_wait, .stop = stop};
    const auto comma = key.find(',');
    std::vector<redlimit::Claim> claims;
    if (comma != std::string::npos) {
      claims = {{&limiter, key.substr(0, comma), 1}, {&limiter, key.substr(comma + 1), 1}};
    }
    redlimit::Decision d;
    if (claims.empty()) {
      d = co_await limiter.acquire(key, 1, options);
    } else {
      d = co_await redlimit::acquire_all(std::move(claims), options);
    }
    if (d.allowed) {
      lines->push_back("allowed " + std::to_string(d.server_time_us) + " " +
                       std::to_string(d.waited.count()) + " " + std::to_string(steady_ns()) + " " +
                       std::to_string(unix_us()));
    } else {
      lines->push_back("denied " + std::to_string(d.retry_after.count()) + " " +
                       std::to_string(d.waited.count()) + " " +
                       std::string(redlimit::to_string(d.source)));
    }
  } catch (const redlimit::Cancelled&) {
    lines->push_back("cancelled " + std::to_string(index));
  } catch (const redlimit::Error& e) {
    lines->push_back(std::string("error ") + e.what());
  }
}

redlimit::Task<void> cancel_later(uv_loop_t* loop, std::chrono::milliseconds after,
                                  std::vector<std::stop_source>* stops) {
  co_await redlimit::sleep_for(loop, after);
  for (std::size_t i = 1; i < stops->size(); i += 2)
    (*stops)[i].request_stop();
}

redlimit::Task<void> main_task(uv_loop_t* loop, redlimit::Client& client,
                               redlimit::Limiter& limiter, std::string key, int count,
                               std::int64_t start_unix_us, std::chrono::milliseconds max_wait,
                               bool cancel_odd, std::chrono::milliseconds cancel_after,
                               std::vector<std::string>* lines) {
  co_await client.connect();
  co_await redlimit::sleep_for(loop, std::chrono::microseconds(start_unix_us - unix_us()));
  std::vector<std::stop_source> stops(static_cast<std::size_t>(count));
  redlimit::TaskGroup group;
  const auto semicolon = key.find(';');
  for (int i = 0; i < count; ++i) {
    std::string own_key = key;
    if (semicolon != std::string::npos)
      own_key = i % 2 == 0 ? key.substr(0, semicolon) : key.substr(semicolon + 1);
    group.add(wait_one(limiter, std::move(own_key), max_wait,
                       stops[static_cast<std::size_t>(i)].get_token(), i, lines));
  }
  if (cancel_odd) group.add(cancel_later(loop, cancel_after, &stops));
  co_await group.join();
  co_await client.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 11 && argc != 12) {
    std::fprintf(stderr,
                 "usage: waiter <url> <key> <permits> <period_us> <count> <start_unix_us> "
                 "<max_wait_ms> <cancel_odd> <cancel_after_ms> <out> [<reservation_lease_ms>]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const redlimit::Limit limit{redlimit::Algorithm::gcra,
                              {std::stoll(argv[3]), std::chrono::microseconds(std::stoll(argv[4]))},
                              1,
                              redlimit::Window::aligned};
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<std::string> lines;
  {
    // Why long timeouts: on a loaded machine a process just started may wait over a second for
    // its connection; the tests that start it measure what happens after its reservations. A
    // process stopped and continued (the reclaim test) asks Redis for all its waiters at once:
    // under the sanitizers beside a compile, with a 2 s command timeout, 107 of its 400 ended
    // denied after about 2.5 s, where only the failure policy denies (max_wait is a minute).
    redlimit::ClientOptions options{
        .url = argv[1], .connect_timeout = 5000ms, .command_timeout = 5000ms};
    if (argc == 12) options.reservation_lease = std::chrono::milliseconds(std::stoll(argv[11]));
    redlimit::Client client(&loop, options);
    redlimit::Limiter limiter(client, redlimit::Policy::of(limit), {.name = "waiting"});
    redlimit::run(
        &loop,
        main_task(&loop, client, limiter, argv[2], std::stoi(argv[5]), std::stoll(argv[6]),
                  std::chrono::milliseconds(std::stoll(argv[7])), std::string(argv[8]) == "1",
                  std::chrono::milliseconds(std::stoll(argv[9])), &lines));
  }
  std::ofstream out(argv[10]);
  for (const auto& line : lines)
    out << line << "\n";
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
