-- reserve: acquire() on a single-limit policy of gcra, token_bucket or leaky_bucket. Reserves
-- the permits at the earliest slot they fit, if the wait is within max_wait, or cancels a
-- reservation that is still pending. Models: src/algorithms/reservations.cpp.
--
-- KEYS[1]   the limit's key
-- KEYS[2]   its cancellation log, KEYS[1] .. ':cancels' (see reservations/cancel.lua)
-- ARGV[1]   'reserve' or 'cancel'
-- ARGV[2]   permits
-- ARGV[3]   now in microseconds for tests, or '' to use the server's TIME (as in
--           lua/shapes/general.lua)
-- ARGV[4-7] the limit: algorithm, p, d, burst (as in lua/shapes/general.lua)
-- ARGV[8]   reserve: the longest wait the caller accepts, in microseconds
-- ARGV[8-12] cancel: the reservation as its reply described it: slot (microseconds, fraction
--           in 1/p), version, epoch and cancels
--
-- reserve returns {allowed (0/1), now_us, limit, remaining, retry_after_us, reset_after_us,
-- wait_us, slot_us, slot_fraction, version, cancels, epoch}; a denied reservation (wait beyond
-- max_wait, or a full leaky queue) writes nothing, and retry_after is the wait it would have had.
-- cancel returns {verdict, now_us}: 1 returned, 0 due (the slot has come: the permits were
-- used), 2 refused (the key was reset since: nothing goes back). When it returned permits, it
-- publishes on KEYS[1] .. ':cancelled' the message
-- "cancels:epoch:cancelled_version:shift_us:shift_f:p" (cancels: the key's, this one included)
-- so that waiters behind the cancelled one, in every process, can move earlier by the shift.

local RESERVATIONS = {}
local TTL_EXTRA_MS = 0
--!include lib/exact.lua
--!include lib/frac_time.lua
--!include lib/tokens.lua
--!include reservations/cancel.lua
--!include reservations/gcra.lua
--!include reservations/token_bucket.lua
--!include reservations/leaky_bucket.lua

local op = ARGV[1]
if #KEYS ~= 2 or (op == 'reserve' and #ARGV ~= 8) or (op == 'cancel' and #ARGV ~= 12) then
  error('redlimit: reserve takes two keys and 8 (reserve) or 12 (cancel) arguments')
end
local reservation = RESERVATIONS[ARGV[4]]
if reservation == nil then error('redlimit: no reservations for algorithm ' .. tostring(ARGV[4])) end
--!include lib/permits_and_now.lua
local p = integer_arg(ARGV[5], 'p', 1, MAX_EXACT)
local d = integer_arg(ARGV[6], 'd', 1, MAX_EXACT)
local burst = integer_arg(ARGV[7], 'burst', 1, MAX_EXACT)

if op == 'reserve' then
  local max_wait = integer_arg(ARGV[8], 'max_wait', 0, 1099511627776)  -- 2^40 us, 12.7 days
  local allowed, limit, remaining, retry, reset, wait, slot, slot_f, book, commit =
      reservation[1](KEYS[1], now, permits, p, d, burst, max_wait)
  if allowed then
    commit()
    if book[1] == 1 then redis.call('DEL', KEYS[2]) end  -- a new epoch: the old log is void
  end
  local flag = 0
  if allowed then flag = 1 end
  return {flag, now, limit, remaining, retry, reset, wait, slot, slot_f, book[1], book[2], book[3]}
elseif op == 'cancel' then
  local slot = integer_arg(ARGV[8], 'slot', 0, MAX_EXACT)
  local slot_f = integer_arg(ARGV[9], 'slot fraction', 0, p - 1)
  local cancelled = integer_arg(ARGV[10], 'version', 1, MAX_EXACT)
  local epoch = integer_arg(ARGV[11], 'epoch', 0, MAX_EXACT)
  local before = integer_arg(ARGV[12], 'cancels', 0, MAX_EXACT)
  local verdict, shift, shift_f, book = reservation[2](KEYS[1], KEYS[2], now, permits, p, d,
                                                       burst, slot, slot_f, cancelled, epoch,
                                                       before)
  if verdict == 'refused' then return {2, now} end
  if verdict == 'due' then return {0, now} end
  redis.call('PUBLISH', KEYS[1] .. ':cancelled',
             string.format('%d:%d:%d:%d:%d:%d', book[2], book[3], cancelled, shift, shift_f, p))
  return {1, now}
end
error('redlimit: operation must be reserve or cancel, got ' .. tostring(op))
