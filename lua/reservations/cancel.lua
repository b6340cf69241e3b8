-- Reservation bookkeeping and cancellation. A key that acquire() reserved on keeps
-- {version, cancels, epoch}: `version` counts its reservations (a reservation's version is its
-- place in the queue), `cancels` its returned cancellations, and `epoch` is the server time of
-- its first reservation (a key deleted by reset() or expiry starts a new epoch; two epochs of
-- one key starting in the same microsecond, possible only after the clock stepped back, would
-- be taken for one).
--
-- Cancelling gives a reservation's permits back only if its slot is still ahead. Its slot is
-- where it was reserved, moved earlier by every later cancellation of a reservation ahead of it
-- (that is what the waiters, told by a notice, do). So that the script knows it exactly, even
-- when a client missed a notice or one is still in flight, the key keeps a log of its recent
-- cancellations: a sorted set `<key>:cancels` scored by cancellation number, each member
-- "number:cancelled_version:shift_us:shift_f:p:backlog_end_us" (p: the denominator of the
-- shift's fraction; a reservation under another one moves by whole microseconds, rounded down).
-- A cancellation matters only to reservations made before it, whose slots are all at or before
-- the backlog's end at that moment; once that time has passed, they are all due, and a second
-- later (LOG_GRACE_US) the entry goes (oldest first). A reservation that missed a removed entry
-- is therefore due.
--
-- Why moving the waiters behind is safe: a cancellable reservation waited, so every reservation
-- made after it while it was pending found a backlog longer than tau >= n*T ahead of its own
-- arrival; moving it n*T earlier never moves it before the moment it would have had without the
-- cancelled one. After a policy change, the key is carried over to the limit in force and moves
-- back by n*T' only: the waiters then move by min(n*T, n*T') (waiters_shift), never further
-- than the key did. Model: src/algorithms/reservations.cpp.

-- How many stale entries one call removes at most (each call adds one at most).
local LOG_PRUNE_MAX = 16
-- How long an entry outlives its backlog's end, in microseconds: as long as a key reserved on
-- outlives its state (lib/reserved_grace.lua), so that a waiter its busy process wakes late
-- still finds where it stands.
local LOG_GRACE_US = 1000000

-- Removes the oldest entries whose backlog end passed over LOG_GRACE_US ago; the number of the
-- oldest entry left, or nil when none is.
local function prune_cancel_log(log, now)
  local removed = 0
  while true do
    local oldest = redis.call('ZRANGE', log, 0, 0)
    if #oldest == 0 then return nil end
    local number, _, _, _, _, backlog_end = split_value(oldest[1])
    if backlog_end + LOG_GRACE_US > now or removed == LOG_PRUNE_MAX then return number end
    redis.call('ZREMRANGEBYRANK', log, 0, 0)
    removed = removed + 1
  end
end

-- The slot now of the reservation (version, made after `cancels_before` cancellations, reserved
-- at slot) on a key with `cancels` cancellations, in 1/p us; nil when an entry it needs was
-- removed (it is due); nil and true when the log holds its own cancellation (it was returned).
-- `oldest` is the number of the log's oldest entry. A reservation of a batch being reclaimed is
-- answered by reclaimed_slot (reservations/reclaim_slots.lua), the same, from one read per
-- call.
local function current_slot(log, cancels, version, cancels_before, slot, slot_f, p, oldest)
  if reclaiming then
    return reclaimed_slot(log, cancels, version, cancels_before, slot, slot_f, p, oldest)
  end
  if cancels_before >= cancels then return slot, slot_f end
  local entries = redis.call('ZRANGEBYSCORE', log, string.format('(%d', cancels_before),
                             string.format('%d', cancels))
  for _, entry in ipairs(entries) do
    local _, cancelled = split_value(entry)
    if cancelled == version then return nil, true end
  end
  if #entries < cancels - cancels_before then return nil end
  for _, entry in ipairs(entries) do
    local _, cancelled, shift, shift_f, den = split_value(entry)
    if cancelled < version then
      if den ~= p then shift_f = 0 end  -- under another policy: whole microseconds, rounded down
      slot, slot_f = sub_frac(slot, slot_f, shift, shift_f, p)
    end
  end
  return slot, slot_f
end

-- Where the reservation (version, made after `cancels_before` cancellations, reserved at slot,
-- in 1/p us) stands now, for a waiter that may have missed a notice (lua/reserve.lua, confirm
-- and locate):
-- 0 and the slot as reserved when no cancellation came since; 1 and the slot moved by every
-- cancellation ahead of it; 2 when it was itself given back (its owner lease lapsed); 3 when
-- the key no longer knows it: an entry it needs was pruned, or the key is gone or of another
-- epoch. Why 3 for a key gone: it lives until its backlog has passed, which holds the waiter's
-- slot unless cancellations moved it earlier (or the key was reset, or Redis lost it). Then the
-- key's cancellations that answer counts (0 for 3). Writes nothing.
local function confirm_slot(key, log, p, slot, slot_f, version, epoch, cancels_before)
  local stored = redis.call('GET', key)
  local key_version, cancels, key_epoch
  -- Fields 4 to 6 of every reservable value (lib/load_frac_time.lua, lib/load_tokens.lua).
  if stored then
    key_version, cancels, key_epoch = string.match(stored, '^[^:]*:[^:]*:[^:]*:(%d+):(%d+):(%d+)')
  end
  if not key_version then return 3, slot, slot_f, 0 end
  key_version, cancels, key_epoch = tonumber(key_version), tonumber(cancels), tonumber(key_epoch)
  if key_epoch ~= epoch or version > key_version or cancels_before > cancels then
    return 3, slot, slot_f, 0
  end
  if cancels_before == cancels then return 0, slot, slot_f, cancels end
  local at, at_f = current_slot(log, cancels, version, cancels_before, slot, slot_f, p, nil)
  if at == nil and at_f then return 2, slot, slot_f, cancels end
  if at == nil then return 3, slot, slot_f, 0 end
  return 1, at, at_f, cancels
end

-- 'refused' (the key is of another epoch: nothing changes), 'already' (a cancel returned it
-- before: nothing changes), 'due' (the slot has come: the caller keeps the permits) or
-- 'returned', for the reservation (slot, version, its epoch, cancels_before) of a key whose
-- bookkeeping is (key_version, cancels, key_epoch).
--
-- Cancelling twice: the second cancel finds the first in the log and is answered 'already'.
-- Once that entry is pruned it is answered 'due' (the log cannot tell it from a used slot), but
-- only after the reservation's slot (the entry lives until the backlog end at the first cancel,
-- at or after that slot). 'due' writes nothing, so no answer gives permits back twice; a caller
-- that took 'due' as leave to use them after cancelling twice would over-admit, and acquire()
-- never cancels a ticket twice (src/limiter/acquire.cpp).
local function cancel_verdict(log, key_version, cancels, key_epoch, now, p, slot, slot_f, version,
                              epoch, cancels_before)
  if key_version == 0 or key_epoch ~= epoch or version > key_version or
      cancels_before > cancels then
    return 'refused'
  end
  local oldest = prune_cancel_log(log, now)
  local at, at_f = current_slot(log, cancels, version, cancels_before, slot, slot_f, p, oldest)
  if at == nil and at_f then return 'already' end
  if at == nil or not after_frac(at, at_f, now, 0) then return 'due' end
  return 'returned'
end

-- True if a/b < c/d, exactly, for integers 0 <= a, c <= 2^52 and 0 < b, d <= 2^52.
-- Why not a*d < c*b: the products may pass 2^53, where doubles round; comparing the continued
-- fractions forms none.
local function ratio_less(a, b, c, d)
  while true do
    local qa = IDIV(a, b)
    local qc = IDIV(c, d)
    if qa ~= qc then return qa < qc end
    a, c = a - qa * b, c - qc * d
    if c == 0 then return false end
    if a == 0 then return true end
    a, b, c, d = d, c, b, a  -- with whole parts equal, a/b < c/d exactly when d/c < b/a
  end
end

-- How far the waiters behind a returned cancellation of n permits move, as (us, f, the
-- fraction's denominator): the reservation's own step n*reserved_d/reserved_p, or the step the
-- key got back under the limit in force, n*d/p, if that is shorter (after a loosening, the old
-- step would move them ahead of the key's converted schedule). Equal steps keep the
-- reservation's denominator, that of the waiters reserved with it.
local function waiters_shift(n, d, p, reserved_d, reserved_p)
  if ratio_less(d, p, reserved_d, reserved_p) then
    local us, f = scaled(n, d, p)
    return us, f, p
  end
  local us, f = scaled(n, reserved_d, reserved_p)
  return us, f, reserved_p
end

-- Logs a returned cancellation, the key's cancels-th; the log lives as long as its latest
-- backlog end, and LOG_GRACE_US more.
local function log_cancel(log, now, cancels, version, shift, shift_f, p, backlog_end)
  redis.call('ZADD', log, cancels,
             string.format('%d:%d:%d:%d:%d:%d', cancels, version, shift, shift_f, p, backlog_end))
  local ttl_ms = ceil_div(backlog_end + LOG_GRACE_US - now, 1000) + TTL_EXTRA_MS
  if ttl_ms < 1 then ttl_ms = 1 end
  if redis.call('PTTL', log) < ttl_ms then redis.call('PEXPIRE', log, ttl_ms) end
end
