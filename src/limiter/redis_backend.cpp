#include "limiter/redis_backend.hpp"

#include <array>
#include <charconv>
#include <utility>

#include "algorithms/reservations.hpp"
#include "lua_scripts.hpp"
#include "policy/stale_policy.hpp"
#include "redis/reply_builder.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// The keys beside a reservation key: the sorted set of its recent cancellations
/// (lua/reservations/cancel.lua) and those of its owner leases (lua/reservations/leases.lua).
std::array<std::string, 3> side_keys(const std::string& reservation_key) {
  return {reservation_key + ":cancels", reservation_key + ":leases", reservation_key + ":held"};
}

template <class Request>
std::string now_argument(const Request& request) {
  return request.now_us != 0 ? std::to_string(request.now_us) : std::string();
}

/// `base + suffix`, written where the object lives: in a coroutine frame (pooled, see
/// runtime/frame_pool.cpp) a decision's key then costs no heap allocation. A key too long for
/// the inline buffer goes to the heap.
/// Why neither copyable nor movable: view() points into the object itself.
class JoinedKey {
 public:
  JoinedKey(std::string_view base, std::string_view suffix) {
    const std::size_t size = base.size() + suffix.size();
    char* out = inline_.data();
    if (size > inline_.size()) {
      heap_.resize(size);
      out = heap_.data();
    }
    base.copy(out, base.size());
    suffix.copy(out + base.size(), suffix.size());
    view_ = std::string_view(out, size);
  }
  JoinedKey(const JoinedKey&) = delete;
  JoinedKey& operator=(const JoinedKey&) = delete;

  std::string_view view() const noexcept { return view_; }

 private:
  std::array<char, 192> inline_;
  std::string heap_;
  std::string_view view_;
};

/// Reads an optional '-' and 1 to 18 decimal digits at `at` (so no overflow is possible),
/// advancing `at` past them. `at` points into a NUL-terminated text.
/// Why not std::from_chars: its overflow checks per digit made it most of a decision's reply
/// parsing; every field of a lean script's reply is below 2^53 (16 digits). Why no end check
/// per digit: the terminating NUL is not a digit, so it ends the loop.
bool parse_integer(const char*& at, std::int64_t& value) {
  const bool negative = *at == '-';
  if (negative) ++at;
  const char* const digits = at;
  std::uint64_t magnitude = 0;  // unsigned: wraps harmlessly past 18 digits, refused below
  for (unsigned digit; (digit = static_cast<unsigned char>(*at) - unsigned{'0'}) <= 9; ++at)
    magnitude = magnitude * 10 + digit;
  if (at == digits || at - digits > 18) return false;
  const auto signed_magnitude = static_cast<std::int64_t>(magnitude);
  value = negative ? -signed_magnitude : signed_magnitude;
  return true;
}

/// The Decision in the fields of a decide, reserve or lean script's reply: allowed (1), server
/// time, capacity, remaining, retry_after and reset_after (us).
Decision redis_decision(const std::array<std::int64_t, 6>& fields, std::size_t binding) {
  return Decision{.allowed = fields[0] == 1,
                  .limit = fields[2],
                  .remaining = fields[3],
                  .retry_after = std::chrono::microseconds(fields[4]),
                  .reset_after = std::chrono::microseconds(fields[5]),
                  .server_time_us = fields[1],
                  .binding = binding,
                  .source = Source::redis};
}

/// The fields of the `script` script's reply of `count` fields; StalePolicy for its
/// `{-1, stored_pv}`.
const std::vector<Reply>& reply_fields(const Reply& reply, std::size_t count,
                                       std::string_view script) {
  const auto& fields = reply.as_array();
  if (fields.size() == 2 && fields[0].as_integer() == -1) throw StalePolicy(fields[1].as_integer());
  if (fields.size() != count) {
    throw ProtocolError("the " + std::string(script) + " script returned " +
                        std::to_string(fields.size()) + " fields, expected " +
                        std::to_string(count));
  }
  return fields;
}

/// The notice in a message of the reserve script's cancel; nullopt if malformed.
std::optional<CancelNotice> notice_from_message(std::string_view message) {
  std::array<std::int64_t, 6> values{};
  std::size_t from = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::size_t colon = i + 1 < values.size() ? message.find(':', from) : message.size();
    if (colon == std::string_view::npos) return std::nullopt;
    const auto [end, ec] =
        std::from_chars(message.data() + from, message.data() + colon, values[i]);
    if (ec != std::errc{} || end != message.data() + colon) return std::nullopt;
    from = colon + 1;
  }
  if (values[5] <= 0) return std::nullopt;
  return CancelNotice{.cancels = values[0],
                      .epoch = values[1],
                      .cancelled = values[2],
                      .shift = {values[3], values[4]},
                      .den = values[5]};
}

/// A reservation's ticket, as the reserve script's cancel, confirm and locate take it.
std::array<std::int64_t, 7> ticket_numbers(const CancelTicket& ticket) {
  return {ticket.slot.us,        ticket.slot.frac, ticket.version, ticket.epoch,
          ticket.cancels_before, ticket.den,       ticket.d};
}

}  // namespace

std::string reset_mark_key(std::string_view key_base) {
  return std::string(key_base) + ":reset";
}

const scripts::ScriptSource* lean_decide_script(const DecideRequest& request) {
  const auto& limits = request.policy->limits();
  if (request.operation != Operation::acquire || limits.size() != 1) return nullptr;
  switch (limits.front().limit.algorithm) {
    case Algorithm::gcra:
      return &scripts::decide_gcra;
    case Algorithm::token_bucket:
      return &scripts::decide_token_bucket;
    case Algorithm::leaky_bucket:
      return &scripts::decide_leaky_bucket;
    case Algorithm::fixed_window:
      return &scripts::decide_fixed_window;
    case Algorithm::sliding_window_counter:
      return &scripts::decide_sliding_window_counter;
    case Algorithm::sliding_window_log:
      return &scripts::decide_sliding_window_log;
  }
  return nullptr;
}

std::size_t reply_index(std::int64_t index, std::size_t count, std::string_view script,
                        std::string_view what) {
  if (index < 0 || static_cast<std::size_t>(index) >= count) {
    throw ProtocolError("the " + std::string(script) + " script named " + std::string(what) + " " +
                        std::to_string(index) + " of " + std::to_string(count));
  }
  return static_cast<std::size_t>(index);
}

Decision decision_from_fields(const std::vector<Reply>& fields, std::size_t first,
                              std::size_t binding) {
  return redis_decision({fields[0].as_integer(), fields[1].as_integer(), fields[first].as_integer(),
                         fields[first + 1].as_integer(), fields[first + 2].as_integer(),
                         fields[first + 3].as_integer()},
                        binding);
}

Decision decision_from_reply(const Reply& reply, std::size_t limit_count) {
  const auto& fields = reply_fields(reply, 7, "decide");
  return decision_from_fields(fields, 3,
                              reply_index(fields[2].as_integer(), limit_count, "decide"));
}

GeneralScriptCall::GeneralScriptCall(std::span<const DecideRequest> requests,
                                     std::string_view operation, std::int64_t amount) {
  for (const DecideRequest& request : requests) {
    for (const CompiledLimit& limit : request.policy->limits())
      add_key(request.key_base.str() + limit.key_suffix);
  }
  add_argument(operation);
  add_number(amount);
  add_owned(now_argument(requests.front()));
  for (const std::string& field : requests.front().policy->epoch_fields())
    add_argument(field);
  for (const DecideRequest& request : requests) {
    for (const CompiledLimit& limit : request.policy->limits()) {
      for (const std::string& field : limit.fields)
        add_argument(field);
    }
  }
}

ReserveScriptCall::ReserveScriptCall(std::span<const DecideRequest> requests,
                                     std::string_view operation) {
  for (const DecideRequest& request : requests) {
    const std::string key = reservation_key(request);
    add_key(key);
    for (std::string& side : side_keys(key))
      add_key(std::move(side));
  }
  const DecideRequest& first = requests.front();
  add_argument(operation);
  add_number(first.permits);
  add_owned(now_argument(first));
  for (const std::string& field : first.policy->epoch_fields())
    add_argument(field);
  for (const std::string& field : first.policy->limits().front().fields)
    add_argument(field);
}

Decision decision_from_lean_reply(const Reply& reply) {
  std::array<std::int64_t, 6> fields{};
  bool ok = reply.type == Reply::Type::string;
  const char* at = reply.str.c_str();
  const char* const end = at + reply.str.size();
  if (ok && *at == 's') {  // "stale <stored_pv>"
    const std::string_view prefix = "stale ";
    std::int64_t stored = 0;
    ok = reply.str.starts_with(prefix);
    if (ok) at += prefix.size();
    if (ok && parse_integer(at, stored) && at == end) throw StalePolicy(stored);
    ok = false;
  }
  for (std::size_t i = 0; ok && i < fields.size(); ++i) {
    if (i > 0) ok = *at++ == ' ';
    if (ok) ok = parse_integer(at, fields[i]);
  }
  if (!ok || at != end || (fields[0] != 0 && fields[0] != 1)) {
    throw ProtocolError("a lean decide script returned an unexpected reply: " +
                        (reply.type == Reply::Type::string ? reply.str : std::string("not text")));
  }
  return redis_decision(fields, 0);
}

Task<void> RedisBackend::run(std::span<BackendOp> ops) {
  return run_each(ops, [this](auto& op) { return perform(op); });
}

Task<void> RedisBackend::perform(DecideOp& op) {
  const DecideRequest& request = op.request;
  // Why scripts of their own: try_acquire on a single limit is the most common call, and a lean
  // script costs Redis 0.4-0.9 x what the general one does (docs/performance.md).
  if (const scripts::ScriptSource* lean = lean_decide_script(request)) {
    // Why not with an injected time (tests): the reclaim's throttle runs on the steady clock.
    const bool reclaiming = lease_us() > 0 && request.operation == Operation::acquire &&
                            request.now_us == 0 &&
                            can_reserve(request.policy->limits().front().limit.algorithm);
    return decide_with_lean_script(*lean, op, reclaiming);
  }
  return decide_generally(op);
}

Task<void> RedisBackend::decide_with_lean_script(const scripts::ScriptSource& script, DecideOp& op,
                                                 bool reclaiming) {
  const DecideRequest& request = op.request;
  const CompiledLimit& limit = request.policy->limits().front();
  const JoinedKey key(request.key_base.view(), limit.key_suffix);
  const std::array<std::string_view, 1> keys = {key.view()};
  const std::string permits = std::to_string(request.permits);
  const std::string now = now_argument(request);
  const auto& epoch = request.policy->epoch_fields();
  const std::array<std::string_view, 8> args = {
      permits,        now, epoch[0], epoch[1], epoch[2], limit.fields[1], limit.fields[2],
      limit.fields[3]};
  Reply reply = co_await calls_.eval(script, keys, args, client_.command_deadline());
  Decision& decision = op.result;
  decision = decision_from_lean_reply(reply);
  decision.policy_version = request.policy->epoch().version;
  reuse_reply_text(std::move(reply.str));
  // Why only a denial longer than a lease: a shorter backlog holds no registered reservation.
  // Why a frame of its own: a denial that long is rare, and a decision costs one frame less.
  if (reclaiming && !decision.allowed && decision.retry_after.count() > lease_us()) {
    co_await reclaim_and_decide(script, op);
  }
}

Task<Decision> RedisBackend::decide_with_general_script(const DecideRequest& request) {
  DecideOp op{request};
  co_await decide_generally(op);
  co_return op.result;
}

Task<void> RedisBackend::decide_generally(DecideOp& op) {
  const DecideRequest& request = op.request;
  const GeneralScriptCall call(
      {&request, 1}, request.operation == Operation::acquire ? "acquire" : "peek", request.permits);
  const Reply reply =
      co_await calls_.eval(scripts::decide, call.keys(), call.args(), client_.command_deadline());
  op.result = decision_from_reply(reply, request.policy->limits().size());
  op.result.policy_version = request.policy->epoch().version;
}

Task<void> RedisBackend::perform(ResetOp& op) {
  ScriptCall call;
  call.add_key(reset_mark_key(op.key_base));
  for (const CompiledLimit& limit : op.policy->limits())
    call.add_key(op.key_base + limit.key_suffix);
  if (can_reserve(op.policy->limits().front().limit.algorithm)) {
    for (std::string& side : side_keys(op.key_base + op.policy->limits().front().key_suffix))
      call.add_key(std::move(side));
  }
  call.add_owned(now_argument(op));
  co_await calls_.eval(scripts::reset, call.keys(), call.args(), client_.command_deadline());
}

Task<void> RedisBackend::perform(TtlOp& op) {
  std::vector<std::string> argv = {"PTTL", op.key};
  const Reply reply = co_await client_.command(std::move(argv));
  // PTTL: -2 when the key does not exist; every key redlimit writes has a TTL (never -1).
  const std::int64_t ms = reply.as_integer();
  if (ms >= 0) op.result = std::chrono::milliseconds(ms);
}

Task<void> RedisBackend::perform(ReserveOp& op) {
  const LimitSpec& spec = op.request.policy->limits().front().spec;
  const std::array<std::int64_t, 2> numbers = {op.max_wait_us, lease_us()};
  const Reply reply = co_await run_reserve_script("reserve", op.request, numbers);
  const auto& fields = reply_fields(reply, 13, "reserve");
  Reservation& out = op.result;
  out.decision = decision_from_fields(fields, 2, 0);
  out.decision.policy_version = op.request.policy->epoch().version;
  out.reserved_at_us = fields[1].as_integer();
  out.wait_us = fields[6].as_integer();
  out.slot = {fields[7].as_integer(), fields[8].as_integer()};
  out.book = {fields[9].as_integer(), fields[10].as_integer(), fields[11].as_integer()};
  out.den = spec.a;
  out.d = spec.b;
  out.lease_expiry_us = fields[12].as_integer();
}

Task<void> RedisBackend::reclaim_and_decide(const scripts::ScriptSource& script, DecideOp& op) {
  const DecideRequest& request = op.request;
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  std::string key = reservation_key(request);
  if (const auto next = next_reclaim_.find(key); next != next_reclaim_.end() && now < next->second)
    co_return;
  // Why a bounded map: one entry per denied key; the lapsed ones go when it grows.
  if (next_reclaim_.size() >= 4096)
    std::erase_if(next_reclaim_, [now](const auto& entry) { return entry.second <= now; });
  next_reclaim_[std::move(key)] = now + std::chrono::microseconds(lease_us() / 3);
  std::int64_t given_back = 0;
  try {
    const std::array<std::int64_t, 2> numbers = {0, lease_us()};
    const Reply reply = co_await run_reserve_script("reclaim", request, numbers);
    given_back = reply.as_array().at(0).as_integer();
  } catch (const Error&) {
    // The denial stands: Redis answered it; the next denial after a third of a lease retries.
  }
  if (given_back != 0) co_await decide_with_lean_script(script, op, false);
}

std::int64_t RedisBackend::lease_us() const noexcept {
  if (lease_) return lease_->count();
  return std::chrono::duration_cast<std::chrono::microseconds>(client_.options().reservation_lease)
      .count();
}

Task<Reply> RedisBackend::run_reserve_script(std::string operation, const DecideRequest& request,
                                             std::span<const std::int64_t> numbers) {
  ReserveScriptCall call({&request, 1}, operation);
  for (const std::int64_t number : numbers)
    call.add_number(number);
  co_return co_await calls_.eval(scripts::reserve, call.keys(), call.args(),
                                 client_.command_deadline());
}

Task<void> RedisBackend::perform(ReservationOp& op) {
  const ReservationOperation operation = op.operation;
  const CancelTicket& ticket = op.ticket;
  // In the script's words and numbering.
  constexpr std::array<const char*, 4> names = {"cancel", "renew", "confirm", "locate"};
  constexpr std::array verdicts = {CancelVerdict::due, CancelVerdict::returned,
                                   CancelVerdict::refused, CancelVerdict::already_returned};
  const char* const name = names[static_cast<std::size_t>(operation)];
  const std::size_t claim = op.request.claim;
  const std::array<std::int64_t, 2> renewal = {ticket.version, lease_us()};
  const std::array<std::int64_t, 7> located = ticket_numbers(ticket);
  const std::span<const std::int64_t> numbers(operation == ReservationOperation::renew
                                                  ? std::span<const std::int64_t>(renewal)
                                                  : std::span<const std::int64_t>(located));
  const Reply reply = co_await run_reserve_script(name, op.request, numbers);
  const auto& fields = reply.as_array();
  const auto unexpected = [name] {
    return ProtocolError(std::string("the ") + name + " script returned an unexpected reply");
  };
  ReservationReply& out = op.result;
  switch (operation) {
    case ReservationOperation::cancel: {
      if (fields.size() != 2) throw unexpected();
      const std::int64_t verdict = fields[0].as_integer();
      if (verdict == -1) throw StalePolicy(fields[1].as_integer(), claim);
      if (verdict < 0 || verdict >= std::ssize(verdicts)) throw unexpected();
      out.verdict = verdicts[static_cast<std::size_t>(verdict)];
      break;
    }
    case ReservationOperation::renew:
      if (fields.size() != 3) throw unexpected();
      out.lease_expiry_us = fields[0].as_integer() == 1 ? fields[2].as_integer() : 0;
      break;
    case ReservationOperation::confirm:
    case ReservationOperation::locate: {
      const std::int64_t standing = fields.size() == 6 ? fields[2].as_integer() : -1;
      if (standing < 0 || standing > 3) throw unexpected();
      out.lease_held = fields[0].as_integer() == 1;
      out.where = {static_cast<ReservationStanding>(standing),
                   {fields[3].as_integer(), fields[4].as_integer()},
                   fields[5].as_integer()};
      break;
    }
  }
}

std::uint64_t RedisBackend::watch(const DecideRequest& request, NoticeHandler handler,
                                  std::function<void()> on_confirmed) {
  auto on_message = [handler = std::move(handler)](std::string_view message) {
    if (const auto notice = notice_from_message(message)) handler(*notice);
  };
  return client_.subscriber().subscribe(reservation_key(request) + ":cancelled",
                                        std::move(on_message), std::move(on_confirmed));
}

void RedisBackend::unwatch(std::uint64_t id) {
  client_.subscriber().unsubscribe(id);
}

}  // namespace redlimit::detail
