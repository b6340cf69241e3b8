// One process of the try_set race: waits until a shared wall-clock instant, then stores
// `policy` under `name` with PolicyStore::try_set. Exits 0 if it stored it, 3 if another had,
// 1 on an error.
//
// usage: policy_racer <url> <name> <policy text> <start_unix_us>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "redlimit/redlimit.hpp"

namespace {

redlimit::Task<bool> race(redlimit::Client& client, std::string name, std::string policy) {
  co_await client.connect();
  redlimit::PolicyStore store(client);
  co_return co_await store.try_set(std::move(name), redlimit::Policy::parse(policy));
}

redlimit::Task<bool> race_then_close(redlimit::Client& client, std::string name,
                                     std::string policy) {
  std::exception_ptr error;
  bool stored = false;
  try {
    stored = co_await race(client, std::move(name), std::move(policy));
  } catch (...) {
    error = std::current_exception();
  }
  co_await client.close();
  if (error) std::rethrow_exception(error);
  co_return stored;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: policy_racer <url> <name> <policy text> <start_unix_us>\n");
    return 1;
  }
  const std::chrono::sys_time<std::chrono::microseconds> start{
      std::chrono::microseconds(std::stoll(argv[4]))};
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 1;
  try {
    redlimit::Client client(&loop, redlimit::ClientOptions{.url = argv[1]});
    std::this_thread::sleep_until(start);
    status = redlimit::run(&loop, race_then_close(client, argv[2], argv[3])) ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "policy_racer: %s\n", e.what());
  }
  if (uv_loop_close(&loop) != 0) status = 1;
  return status;
}
