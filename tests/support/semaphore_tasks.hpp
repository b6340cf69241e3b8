#pragma once
// Coroutines the semaphore tests share: against Redis (tests/redis/semaphore_test.cpp) and in
// process (tests/unit/local_semaphore_test.cpp) a Semaphore must answer alike.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/semaphore.hpp"

namespace redlimit::test {

/// What taking every permit of a 3-permit semaphore's "tenant" key came to.
struct TakeAllOutcome {
  int granted = 0;            ///< of the first 3 asks
  bool full_refused = false;  ///< the 4th ask, while all 3 were held
  bool free_again = false;    ///< an ask after one of the 3 was released
  std::vector<Source> sources;
};

/// Takes the 3 permits of "tenant", asks for a 4th, releases one and asks again; then releases
/// everything it holds.
inline Task<void> take_three_then_release(Semaphore& semaphore, TakeAllOutcome* outcome) {
  std::vector<Lease> leases;
  for (int i = 0; i < 3; ++i) {
    auto lease = co_await semaphore.try_acquire("tenant");
    if (lease) {
      ++outcome->granted;
      outcome->sources.push_back(lease->source());
      leases.push_back(std::move(*lease));
    }
  }
  outcome->full_refused = !(co_await semaphore.try_acquire("tenant")).has_value();
  co_await leases[0].release();
  auto again = co_await semaphore.try_acquire("tenant");
  outcome->free_again = again.has_value();
  for (Lease& lease : leases)
    co_await lease.release();
  if (again) co_await again->release();
}

/// A lease of one permit of "tenant" if one is free now.
inline Task<void> hold(Semaphore& semaphore, std::optional<Lease>* lease) {
  *lease = co_await semaphore.try_acquire("tenant");
}

/// How an acquire() of one permit of "tenant" ended.
struct AcquireOutcome {
  std::string what;  ///< "granted", "not held" (max_wait) or "cancelled"
  std::chrono::microseconds retry_after{};
  Source source = Source::redis;
  std::chrono::steady_clock::duration waited{};
};

/// acquire() of one permit of "tenant" with `options`; a granted lease is released at once.
inline Task<void> acquire_tenant(Semaphore& semaphore, AcquireOptions options,
                                 AcquireOutcome* outcome) {
  const auto start = std::chrono::steady_clock::now();
  try {
    Lease lease = co_await semaphore.acquire("tenant", 1, options);
    outcome->what = lease ? "granted" : "not held";
    outcome->retry_after = lease.retry_after();
    outcome->source = lease.source();
    if (lease) co_await lease.release();
  } catch (const Cancelled&) {
    outcome->what = "cancelled";
  }
  outcome->waited = std::chrono::steady_clock::now() - start;
}

}  // namespace redlimit::test
