#pragma once
/// @file client.hpp
/// Client: the connection to Redis that limiters share. One client belongs to one loop.

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "redlimit/reply.hpp"
#include "redlimit/task.hpp"

namespace spdlog {
class logger;
}

namespace redlimit {

namespace detail {
class CommandDispatcher;
class StatsPublisher;
}  // namespace detail
class Metrics;

/// The shortest ClientOptions::reservation_lease other than 0 (off).
inline constexpr std::chrono::milliseconds min_reservation_lease{100};
/// The shortest ClientOptions::stats_interval other than 0 (off).
inline constexpr std::chrono::milliseconds min_stats_interval{100};

/// TLS for `rediss://` URLs (OpenSSL; TLS 1.2 or newer).
struct TlsOptions {
  /// PEM file of the certificates that may sign the server's; empty: the system's (the
  /// default verify paths of OpenSSL, e.g. /etc/ssl/certs).
  std::string ca_file{};
  /// PEM files of this client's certificate (chain) and its private key, for servers that
  /// require one (`tls-auth-clients yes`); both or neither.
  std::string cert_file{}, key_file{};
  /// The name the server's certificate must carry, also sent as SNI; empty: the URL's host
  /// (an IP address is then checked against the certificate's IP addresses, without SNI).
  std::string server_name{};
  /// Verify the server's certificate chain and name. false accepts any certificate: the
  /// connection is encrypted but not authenticated (tests only).
  bool verify_peer = true;
};

/// How to reach Redis and how long to wait for it.
struct ClientOptions {
  /// `redis://[[user:]password@]host[:port][/db]` or `unix://[[user:]password@]/path[?db=N]`
  /// for one server, `rediss://...` for one server over TLS (see `tls`);
  /// `redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#name` for the
  /// primary that Redis Sentinel monitors under `name` (sentinels on 26379 unless given;
  /// `rediss-sentinel://` for TLS to the sentinels and the primary; see sentinel_password);
  /// `redis-cluster://[[user:]password@]host:port[,host:port...]` for a Redis Cluster (the seed
  /// nodes the slot map is first read from; every node takes the same credentials). Credentials
  /// without a ':' are a password, as redis-cli reads them (`redis://secret@host`); a user needs
  /// its password (`redis://user:secret@host`). User and password may be percent-encoded. The
  /// password is never logged.
  std::string url = "redis://127.0.0.1:6379";
  /// A connection attempt (TCP connect plus AUTH, SELECT and PING) that takes longer fails.
  std::chrono::milliseconds connect_timeout{1000};
  /// Every command completes or fails by this deadline, counted from the call.
  std::chrono::milliseconds command_timeout{250};
  /// Reconnect backoff: exponential with jitter between these bounds.
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};
  /// Commands outstanding at once (waiting for a connection or for a reply); beyond it a call
  /// fails at once with Overloaded.
  std::size_t max_pending = 65536;
  /// Where redlimit logs; default: the logger registered as "redlimit", else a stderr logger.
  std::shared_ptr<spdlog::logger> logger{};
  /// This client's name in the keys of Scope::per_client policies (each client its own state):
  /// 1 to 64 characters from [A-Za-z0-9_.-]. Empty: 16 random hex digits, so every Client
  /// object (every process) has its own. Name one to keep a client's state across restarts.
  std::string id{};
  /// acquire(): a reservation that waits longer than this is registered under an owner lease
  /// that the client renews every third of it while it waits; if the process dies, the next
  /// script call on the key more than a lease after the last renewal gives the reservation
  /// back (docs/waiting.md). 0: never registered (a dead process's reservations then hold the
  /// key until their slots pass). Otherwise at least min_reservation_lease: anything else is a
  /// ConfigError at construction, before any I/O. Keep it well above the round trip to Redis:
  /// a lease that lapses while its owner renews it makes the owner's waiters reserve again.
  std::chrono::milliseconds reservation_lease{750};
  /// Script calls (decisions, reservations, cancellations, refunds, penalties, blocks, resets,
  /// semaphore calls) queued in one loop iteration for one server (in a cluster, for one
  /// primary, whatever the slots of their keys: Redis >= 7; for one hash slot on older servers)
  /// go to Redis as one script call of at most this many, each decided as if sent alone, in
  /// the order queued; one queued alone goes alone. No timer: only what is already queued when the
  /// loop is about to poll, or, as soon as the callers a batch resumed have queued this many in a
  /// row for one server, those at once (while max_batches_in_flight batches of that server are
  /// in flight, they wait for one of those to end). 1: every call alone. From 1 to
  /// max_batch_limit; anything else is a ConfigError at construction.
  std::size_t max_batch = 64;
  /// Batches (see max_batch) of one server in flight at once. While this many are, the calls
  /// queued for that server wait until one of them ends, then go together: fewer, larger
  /// script calls, each of which costs Redis less per call it holds than several small ones.
  /// A full batch (max_batch calls) goes at once. A call waits only while it can: its deadline
  /// (command_timeout) is never earlier than the end of a batch sent before it; in the batch it
  /// goes in, it still ends by its own deadline (TimeoutError), not by the oldest call's. 0: no
  /// limit, every loop iteration sends what it queued.
  std::size_t max_batches_in_flight = 2;
  /// Where this client and the limiters made from it count what they do; null: a Metrics of
  /// its own (Client::metrics()).
  std::shared_ptr<Metrics> metrics{};
  /// How often the client adds its limiters' decision counts to the fleet's, in Redis: the
  /// hash `<prefix>:stats:{<name>}` (HINCRBY) and the names in `<prefix>:stats:names` (ZADD),
  /// read by read_fleet_counts() and `redlimit watch` (see docs/operations.md). 0 (the
  /// default): never, so the client writes nothing its user did not ask for; e.g. 1 s to feed
  /// `redlimit watch`. Otherwise at least min_stats_interval (else a ConfigError at
  /// construction).
  std::chrono::milliseconds stats_interval{0};
  /// TLS settings for a `rediss://` (or `rediss-sentinel://`) URL; ignored for other URLs.
  /// Files that cannot be read, or a key that does not match its certificate, are a
  /// ConfigError at construction.
  TlsOptions tls{};
  /// For a `redis-sentinel://` URL: how to log in to the sentinels (a sentinel's own
  /// `requirepass`, or an ACL user of it); empty: no AUTH. The URL's credentials are the
  /// primary's.
  std::string sentinel_user{};
  std::string sentinel_password{};
  /// How many replicas of a primary must hold a script call's writes before the calls it
  /// answers are released (docs/failures.md, "Replicated decisions"). 0: answered as soon as
  /// the primary answers (a failover may then lose the latest admissions). Otherwise every
  /// script call or batch of a limiter, semaphore or policy store is followed on its connection
  /// by `WAIT replicas timeout`; calls that wrote (admissions, reservations, renewals,
  /// cancellations, leases, policy writes) are answered once WAIT counts enough replicas, calls
  /// that wrote nothing (denials, peeks, reads) at once. Too few replicas by replica_timeout
  /// make the call Unavailable (a TimeoutError, maybe_executed(): its permits stay taken on the
  /// primary), answered by the limiter's failure policy and counted by the circuit breaker and
  /// in RedisStats::replica_shortfalls. Negative: a ConfigError at construction.
  int replicas = 0;
  /// How long a WAIT may block for the replicas (at most until the call's deadline); with
  /// replicas > 0, from 1 ms to less than command_timeout (else a ConfigError at construction).
  std::chrono::milliseconds replica_timeout{100};
};

/// The largest ClientOptions::max_batch.
inline constexpr std::size_t max_batch_limit = 1024;

/// The connection to Redis. Commands that name a key are routed by the key's hash slot: to the
/// one server, or in a cluster to the primary that serves the slot (one connection per primary;
/// MOVED and ASK are followed, at most 5 per call; TRYAGAIN, CLUSTERDOWN, LOADING and
/// MASTERDOWN are retried with a short backoff while the call's deadline allows (a batch of
/// coalesced calls that Redis ran none of, or some calls of a batch across slots, are sent
/// again as those calls, each alone, when a slot moved or migrates); a lost
/// connection or READONLY makes the client reread the slot map). The client connects lazily on
/// the first command, or on connect().
///
/// Failure behaviour, per command: it completes with a reply or fails by its deadline with a
/// typed error. While a connection attempt is in flight, commands wait for it (within their
/// deadline). Once an attempt has failed, commands fail fast with ConnectionError (nothing
/// sent) until the next attempt, which comes after an exponential backoff with jitter; only
/// one attempt is ever in flight. A connection that lost a reply deadline is suspect (replies
/// are FIFO), so it is dropped and re-established; its other in-flight commands fail with
/// ConnectionError, maybe_executed() = true.
///
/// SIGPIPE: the client never lets a write to a closed socket raise SIGPIPE. If the process does
/// not already ignore SIGPIPE, each socket write blocks it for the loop thread and discards a
/// pending one; nothing is required from the application (ignoring SIGPIPE saves a few
/// syscalls per write).
///
/// Movable, non-copyable (a moved-from client may only be destroyed or assigned to); not
/// thread-safe: use it only on its loop's thread. Call close() and let it finish before closing
/// the loop. The connections are shared with the limiters made from this client: they live
/// until the client and all those limiters are gone, so the client may be destroyed first.
class Client {
 public:
  /// Validates the options (ConfigError, e.g. for a malformed URL); does no I/O.
  Client(uv_loop_t* loop, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  /// Takes over `other`'s connections.
  Client(Client&& other) noexcept;
  /// Releases this client's connections (close() them first) and takes over `other`'s.
  Client& operator=(Client&& other) noexcept;

  /// Connects now instead of on the first command; fails by connect_timeout.
  Task<void> connect();
  /// First ends the calls waiting for permits on this client (Limiter::acquire(), acquire_all(),
  /// Semaphore::acquire()): each ends with Cancelled, its reservations (or a grant made
  /// meanwhile) given back, and close() waits for them; such a call started once close() has
  /// begun ends with Cancelled at once. Then waits for the library's background work on this client
  /// (releases of destroyed Leases, refunds of abandoned reservations), so that it reaches Redis;
  /// then sends the calls already queued, stops accepting commands, waits for those in flight (each
  /// is bounded by its deadline; a script Redis forgot meanwhile is loaded again for them),
  /// disconnects and closes every handle. Idempotent. The tasks of connect(), close() and command()
  /// keep what they need alive: the Client may be destroyed once they are started (a callback-style
  /// shutdown: `start(loop, client.close(), done)`, then the Client goes).
  Task<void> close();
  /// Sends one command, e.g. {"SET", "k", "v"}. An error reply raises ReplyError (or
  /// ConfigError for NOPERM, NOAUTH and WRONGPASS). Commands that would turn the connection
  /// into a pub/sub or MONITOR one ((P|S)SUBSCRIBE, their UNSUBSCRIBEs, MONITOR) are an
  /// InvalidArgument.
  Task<Reply> command(std::vector<std::string> argv);
  /// The same with the parts as arguments: `co_await client.command("GET", key)`.
  ///
  /// Prefer this form inside coroutines: g++ 12 cannot compile a braced list in a coroutine
  /// body ("array used as initializer"), so `co_await client.command({"GET", key})` fails to
  /// build there; outside coroutines both forms work.
  template <class... Parts>
  requires(sizeof...(Parts) > 0 && (std::is_convertible_v<const Parts&, std::string_view> &&
                                    ...)) Task<Reply> command(const Parts&... parts) {
    std::vector<std::string> argv;
    argv.reserve(sizeof...(parts));
    (argv.emplace_back(std::string_view(parts)), ...);
    return command(std::move(argv));
  }

  /// The loop this client runs on.
  uv_loop_t* loop() const noexcept;
  /// The options in effect.
  const ClientOptions& options() const noexcept;
  /// Where this client counts (ClientOptions::metrics, or its own).
  const std::shared_ptr<Metrics>& metrics() const noexcept;
  /// This client's id (ClientOptions::id, or the random one it got).
  const std::string& id() const noexcept;
  /// Internal: what sends the commands of the limiters and semaphores on this client.
  detail::CommandDispatcher& dispatcher() noexcept { return *dispatcher_; }
  /// Internal: the same, for a limiter or semaphore to share.
  std::shared_ptr<detail::CommandDispatcher> shared_dispatcher() const noexcept {
    return dispatcher_;
  }
  /// Internal: what adds the decision counts of this client's limiters to the fleet's in Redis;
  /// null when ClientOptions::stats_interval is 0.
  const std::shared_ptr<detail::StatsPublisher>& stats_publisher() const noexcept { return stats_; }

 private:
  // Why shared: a Limiter keeps the connections alive after this object is destroyed.
  std::shared_ptr<detail::CommandDispatcher> dispatcher_;
  // Why shared: a Limiter adds its counts to it while it lives, this object or not.
  std::shared_ptr<detail::StatsPublisher> stats_;
};

}  // namespace redlimit
