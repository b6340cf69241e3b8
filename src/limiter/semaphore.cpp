#include "redlimit/semaphore.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stop_token>

#include "limiter/lease_issuer.hpp"
#include "limiter/redis_backend.hpp"
#include "limiter/unavailability.hpp"
#include "policy/key_format.hpp"
#include "policy/validation.hpp"
#include "redis/backoff.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/logger.hpp"
#include "runtime/outliving_call.hpp"

namespace redlimit {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

/// A waiter that heard nothing asks again at least this often (with jitter), in case a release
/// notice was lost while the pub/sub connection was down.
constexpr std::chrono::milliseconds fallback_poll{1000};

std::int64_t checked_capacity(std::int64_t capacity) {
  if (capacity < 1 || capacity > 100'000) {
    throw InvalidArgument("Semaphore permits must be in [1, 100000], got " +
                          std::to_string(capacity));
  }
  return capacity;
}

SemaphoreOptions validated(SemaphoreOptions options) {
  check_name("SemaphoreOptions::name", options.name);
  check_prefix("SemaphoreOptions::prefix", options.prefix);
  check_failure_policy("SemaphoreOptions::on_failure", options.on_failure);
  if (options.lease_ttl.count() < 1 || options.lease_ttl.count() > 1'099'511'627) {
    throw InvalidArgument(
        "SemaphoreOptions::lease_ttl must be in [1 ms, 2^40 us (about 12.7 days)], got " +
        std::to_string(options.lease_ttl.count()) + " ms");
  }
  return options;
}

/// Whether a grant that failed with `error` may have been made all the same (its reply lost,
/// or not readable: the script ran).
bool maybe_granted(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Unavailable& e) {
    return e.maybe_executed();
  } catch (const ProtocolError&) {
    return true;
  } catch (...) {
    return false;
  }
}

Grant grant_of(const LeaseReply& reply, Source source) {
  Grant out;
  out.granted = reply.granted;
  out.source = source;
  if (reply.granted) {
    out.expires_at_us = reply.expires_or_free_at_us;
  } else {
    out.retry_after = std::chrono::microseconds(
        std::max<std::int64_t>(reply.expires_or_free_at_us - reply.now_us, 0));
  }
  return out;
}

/// Releases a lease in the background. When Redis cannot answer, the release is tried again
/// with backoff until it can, the lease would have expired, or the client closes; giving up is
/// logged, not reported as a failure: the lease's permits come back at its expiry, as for a
/// holder that died.
Task<void> release_detached(std::shared_ptr<LeaseIssuer> issuer, uv_loop_t* loop, Backend* backend,
                            LeaseRequest request, spdlog::logger* logger) {
  (void)issuer;  // keeps the backend and the logger alive until this ends
  // Why a bound: by then the lease has expired, and its permits are back.
  const auto expired_at =
      std::chrono::steady_clock::now() + std::chrono::microseconds(request.ttl_us);
  BackgroundTasks* const tasks = backend->background();
  const std::stop_token closing = tasks != nullptr ? tasks->closing() : std::stop_token{};
  Backoff backoff(std::chrono::milliseconds(50), std::chrono::seconds(1),
                  std::hash<std::string>{}(request.lease_id));
  for (;;) {
    std::exception_ptr error;
    try {
      // Why a copy each time: a release is idempotent, and one that may have run is sent again.
      co_await backend->run_lease(LeaseOperation::release, request);
      co_return;
    } catch (...) {
      if (!means_unavailable(std::current_exception())) throw;
      error = std::current_exception();
    }
    const auto pause = backoff.next();
    bool stopped =
        closing.stop_requested() || std::chrono::steady_clock::now() + pause >= expired_at;
    if (!stopped) {
      try {
        co_await sleep_for(loop, pause, closing);
      } catch (const Cancelled&) {
        stopped = true;
      }
    }
    if (stopped) {
      logger->warn(
          "{}: a lease's release did not reach Redis ({}); its permits come back when it "
          "expires",
          request.key, describe(error));
      co_return;
    }
  }
}

/// Releases the lease of a grant whose caller was destroyed before its reply arrived: nobody
/// holds it, whether the reply granted it or the grant may have run unheard (as grant() does
/// for a caller still there). Runs as the client's background work, as the grant did.
Task<void> release_orphan(std::shared_ptr<LeaseIssuer> issuer, uv_loop_t* loop, Backend* backend,
                          LeaseRequest request, spdlog::logger* logger,
                          std::optional<LeaseReply> reply, std::exception_ptr error) {
  if ((reply && reply->granted) || maybe_granted(error))
    co_await release_detached(std::move(issuer), loop, backend, std::move(request), logger);
}

}  // namespace

LeaseIssuer::LeaseIssuer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
                         std::unique_ptr<Backend> backend, std::int64_t capacity,
                         SemaphoreOptions options, std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      redis_(std::move(redis)),
      backend_(std::move(backend)),
      capacity_(checked_capacity(capacity)),
      options_(validated(std::move(options))),
      escaped_name_(escape_key_part(options_.name)),
      logger_(std::move(logger)),
      random_(std::random_device{}()) {
  if (redis_ != nullptr) turn_.bind_to(redis_->loop_thread());
  if (redis_ != nullptr && options_.on_failure.kind == FailurePolicy::local_fallback) {
    fallback_ = std::make_unique<LocalBackend>();
    fallback_capacity_ = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::floor(capacity_ * options_.on_failure.local_share)));
  }
}

std::string LeaseIssuer::semaphore_key(std::string_view key) const {
  check_key(key);
  return key_base(options_.prefix, escaped_name_, key).str() + ":semaphore";
}

std::string LeaseIssuer::new_lease_id() {
  char id[33];
  std::snprintf(id, sizeof id, "%016llx%016llx", static_cast<unsigned long long>(random_()),
                static_cast<unsigned long long>(random_()));
  return id;
}

Backend* LeaseIssuer::backend_for(Source source) const noexcept {
  switch (source) {
    case Source::fallback:
      return fallback_.get();
    case Source::fail_open:
    case Source::fail_closed:
      return nullptr;
    default:
      return backend_.get();
  }
}

LeaseRequest LeaseIssuer::request(Source source, std::string key, std::string lease_id,
                                  std::int64_t permits) const {
  const auto ttl = std::chrono::duration_cast<std::chrono::microseconds>(options_.lease_ttl);
  return LeaseRequest(std::move(key), std::move(lease_id),
                      source == Source::fallback ? fallback_capacity_ : capacity_, permits,
                      ttl.count());
}

Lease LeaseIssuer::lease(std::string key, std::string lease_id, std::int64_t permits,
                         const Grant& grant) {
  return Lease(shared_from_this(), std::move(key), std::move(lease_id), permits,
               grant.expires_at_us, grant.source, grant.granted, grant.retry_after);
}

Task<Grant> LeaseIssuer::grant(const std::string& key, const std::string& lease_id,
                               std::int64_t permits) {
  co_await turn_.yield_if_due();
  const Source source = redis_ != nullptr ? Source::redis : Source::local;
  std::exception_ptr error;
  try {
    LeaseRequest asked = request(source, key, lease_id, permits);
    Task<LeaseReply> granting = backend_->run_lease(LeaseOperation::grant, asked);
    if (BackgroundTasks* tasks = backend_->background()) {
      // Why outliving: a caller destroyed before the reply leaves a lease nobody holds; it is
      // released when the reply comes.
      Orphaned<LeaseReply> orphaned =
          std::bind_front(release_orphan, shared_from_this(), loop_, backend_.get(),
                          std::move(asked), logger_.get());
      granting = outliving(*tasks, std::move(granting), std::move(orphaned));
    }
    const LeaseReply reply = co_await std::move(granting);
    co_return grant_of(reply, source);
  } catch (...) {
    error = std::current_exception();
  }
  // The grant may have happened without us hearing of it: give it back.
  if (maybe_granted(error)) release_in_background(source, key, lease_id, permits);
  const FailureAnswer answer = failure_answer(options_.on_failure, fallback_ != nullptr,
                                              permits <= fallback_capacity_, retry_in_after(error));
  if (answer.action == FailureAnswer::Action::ask_fallback) {
    LeaseRequest local = request(Source::fallback, key, lease_id, permits);
    const LeaseReply reply = co_await fallback_->run_lease(LeaseOperation::grant, std::move(local));
    co_return grant_of(reply, Source::fallback);
  }
  co_return Grant{.granted = answer.action == FailureAnswer::Action::allow,
                  .retry_after = answer.retry_after,
                  .source = answer.source};
}

void LeaseIssuer::release_in_background(Source source, std::string key, std::string lease_id,
                                        std::int64_t permits) {
  Backend* const backend = backend_for(source);
  if (backend == nullptr) return;
  Task<void> task = release_detached(shared_from_this(), loop_, backend,
                                     request(source, std::move(key), std::move(lease_id), permits),
                                     logger_.get());
  // Why the client's background work: Client::close() lets the release reach Redis first.
  if (BackgroundTasks* tasks = backend->background()) {
    tasks->start(std::move(task));
  } else {
    start_detached(std::move(task));  // in process: done before this returns
  }
}

Task<LeaseReply> LeaseIssuer::run(const Lease& lease, LeaseOperation operation) {
  Backend* const backend = backend_for(lease.source_);
  // fail_open: nothing is held, so a renewal holds on and a release gives nothing back.
  if (backend == nullptr) co_return LeaseReply{.granted = operation == LeaseOperation::renew};
  LeaseRequest asked = request(lease.source_, lease.key_, lease.id_, lease.permits_);
  co_return co_await backend->run_lease(operation, std::move(asked));
}

Task<std::optional<Lease>> LeaseIssuer::try_acquire(
    std::string key, std::int64_t permits,
    [[maybe_unused]] std::shared_ptr<LeaseIssuer> keep_alive) {
  std::string semaphore = semaphore_key(key);
  check_permits(permits, capacity_, "the semaphore");
  std::string id = new_lease_id();
  const Grant granted = co_await grant(semaphore, id, permits);
  if (!granted.granted) co_return std::nullopt;
  co_return lease(std::move(semaphore), std::move(id), permits, granted);
}

Task<Lease> LeaseIssuer::acquire(std::string key, std::int64_t permits, OwnedAcquireOptions options,
                                 [[maybe_unused]] std::shared_ptr<LeaseIssuer> keep_alive) {
  std::string semaphore = semaphore_key(key);
  check_permits(permits, capacity_, "the semaphore");
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const BackgroundTasks::WaitingCall waiting(backend_->background(), options.stop);
  const auto started = Clock::now();

  // Why a notice per waiter: a release anywhere wakes it at once; expiries need the timer.
  // `releases` counts notices, so one that arrives while a grant is in flight is not lost.
  std::stop_source* wake = nullptr;
  std::uint64_t releases = 0;
  std::function<void()> on_release = [&wake, &releases] {
    ++releases;
    if (wake != nullptr) wake->request_stop();
  };
  struct Watch {
    Backend& backend;
    std::uint64_t id;
    ~Watch() { backend.unwatch(id); }
  } watch{*backend_, backend_->watch_releases(semaphore, std::move(on_release))};

  for (;;) {
    // Why at every turn: a release heard while a grant was in flight asks again at once.
    if (options.stop.stop_requested()) throw Cancelled("semaphore acquire cancelled");
    const std::uint64_t releases_before = releases;
    // Why a new id per attempt: a grant whose reply was lost is being released in the
    // background under its id, which must not release a later grant.
    std::string id = new_lease_id();
    const Grant granted = co_await grant(semaphore, id, permits);
    if (granted.granted) {
      Lease held = lease(std::move(semaphore), std::move(id), permits, granted);
      // Why released: a stop requested while the grant was in flight (its client closing,
      // perhaps) must not end with a lease nobody may be able to release.
      if (options.stop.stop_requested()) {
        throw Cancelled("semaphore acquire cancelled; its grant, made meanwhile, is released");
      }
      co_return held;
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    if (waited >= options.max_wait) {
      co_return lease(std::move(semaphore), std::string(), permits, granted);  // not held
    }
    if (releases != releases_before) continue;  // released while we asked: ask again now
    const std::uint64_t jitter = std::uniform_int_distribution<std::uint64_t>(0, 250'000)(random_);
    auto sleep = std::min<std::chrono::microseconds>(
        granted.retry_after, fallback_poll + std::chrono::microseconds(jitter));
    sleep = std::min(sleep, options.max_wait - waited);
    std::stop_source woken;
    wake = &woken;
    std::stop_callback<ForwardStop> forward(options.stop, ForwardStop{&woken});
    try {
      co_await sleep_for(loop_, sleep, woken.get_token());
    } catch (const Cancelled&) {  // a release notice, or the caller's stop request
    }
    wake = nullptr;
  }
}

}  // namespace detail

// ---- Lease

Lease::Lease(std::shared_ptr<detail::LeaseIssuer> issuer, std::string key, std::string id,
             std::int64_t permits, std::int64_t expires_at_us, Source source, bool held,
             std::chrono::microseconds retry_after)
    : issuer_(std::move(issuer)),
      key_(std::move(key)),
      id_(std::move(id)),
      permits_(permits),
      expires_at_us_(expires_at_us),
      retry_after_(retry_after),
      source_(source),
      held_(held) {}

Lease::Lease(Lease&& other) noexcept
    : issuer_(std::move(other.issuer_)),
      key_(std::move(other.key_)),
      id_(std::move(other.id_)),
      permits_(other.permits_),
      expires_at_us_(other.expires_at_us_),
      released_at_us_(other.released_at_us_),
      retry_after_(other.retry_after_),
      source_(other.source_),
      held_(std::exchange(other.held_, false)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Lease released(std::move(*this));  // releases what this held, in the background
    issuer_ = std::move(other.issuer_);
    key_ = std::move(other.key_);
    id_ = std::move(other.id_);
    permits_ = other.permits_;
    expires_at_us_ = other.expires_at_us_;
    released_at_us_ = other.released_at_us_;
    retry_after_ = other.retry_after_;
    source_ = other.source_;
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

Lease::~Lease() {
  if (!held_) return;
  try {
    issuer_->release_in_background(source_, key_, id_, permits_);
  } catch (...) {
    // Out of memory, or UsageError on a thread other than the loop's: released at expiry.
    detail::report_error(std::current_exception());
  }
}

Task<void> Lease::renew() {
  if (!held_) throw LeaseExpired("renew() of a lease that is not held");
  const detail::LeaseReply reply = co_await issuer_->run(*this, detail::LeaseOperation::renew);
  if (!reply.granted) {
    held_ = false;
    throw LeaseExpired("lease " + id_ +
                       " expired before renew(); its permits may be held by others");
  }
  expires_at_us_ = reply.expires_or_free_at_us;
}

Task<void> Lease::release() {
  if (!held_) co_return;
  held_ = false;
  const detail::LeaseReply reply = co_await issuer_->run(*this, detail::LeaseOperation::release);
  if (reply.granted) released_at_us_ = reply.now_us;
}

// ---- Semaphore

Semaphore::Semaphore(Client& client, std::int64_t permits, SemaphoreOptions options)
    : issuer_(std::make_shared<detail::LeaseIssuer>(
          client.loop(), client.shared_dispatcher(),
          std::make_unique<detail::RedisBackend>(client.dispatcher()), permits, std::move(options),
          client.dispatcher().logger())) {}

Semaphore::Semaphore(Client& client, std::int64_t permits, std::string name,
                     std::chrono::milliseconds lease_ttl)
    : Semaphore(client, permits,
                SemaphoreOptions{.name = std::move(name), .lease_ttl = lease_ttl}) {}

Semaphore::Semaphore(uv_loop_t* loop, std::int64_t permits, SemaphoreOptions options)
    : issuer_(std::make_shared<detail::LeaseIssuer>(
          loop, nullptr, std::make_unique<detail::LocalBackend>(), permits, std::move(options),
          detail::default_logger())) {}

Semaphore::~Semaphore() = default;
Semaphore::Semaphore(Semaphore&& other) noexcept = default;
Semaphore& Semaphore::operator=(Semaphore&& other) noexcept = default;

Task<std::optional<Lease>> Semaphore::try_acquire(std::string key, std::int64_t permits) {
  return issuer_->try_acquire(std::move(key), permits, issuer_);
}

Task<Lease> Semaphore::acquire(std::string key, std::int64_t permits, AcquireOptions options) {
  return issuer_->acquire(std::move(key), permits, detail::OwnedAcquireOptions(options), issuer_);
}

}  // namespace redlimit
