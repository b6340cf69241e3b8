-- Token bucket: tokens refill continuously at p per d us up to `burst`; a request for n permits
-- takes n tokens. Tokens are counted in units of 1/d token so that refill is exact. The key
-- holds the level as lib/load_tokens.lua describes.
-- When the Redis clock steps back: a last refill later than now is a clock step; it is taken
-- as now (no refill for the step, the tokens used stay used) and written back, also when
-- denied, so the key is locked for at most the bucket's own refill, not the whole step
-- (lib/load_tokens.lua).
-- Model: src/algorithms/token_bucket.cpp.
--!params p, d, burst
--!checks p >= 1, d >= 1, burst >= 0

--!part load
local full = burst * d
--!include ../lib/load_tokens.lua
local cost = n * d

--!part outcome
capacity = burst
local left = level
if allowed then left = level - cost end
if left > 0 then
  remaining = IDIV(left, d)
end

--!part until_full
-- Full again after ceil((full - left) / p) us.
reset = CEIL_DIV(full - left, p)

--!section decide
--!use load
allowed = level >= cost
--!use outcome
--!use until_full
-- When denied, enough tokens after ceil((cost - level) / p).
if not allowed then
  retry = CEIL_DIV(cost - level, p)
end

--!section idle
local left = level
--!use until_full

--!section write
-- Writes the level after taking `taken` permits (0: the state carried over to this policy, or
-- a cancel's); the key lives until the bucket is full again (at least 1 ms), and a key reserved
-- on a little longer (lib/reserved_grace.lua).
local written = level - taken * d
--!include ../lib/tokens_value.lua
local until_full = CEIL_DIV(full - written, p)
local ms = CEIL_DIV(until_full, 1000)  -- the TTL in whole milliseconds, rounded up
if ms < 1 then ms = 1 end
--!include ../lib/reserved_grace.lua
redis.call('SET', key, value, 'PX', string.format('%d', ms + TTL_EXTRA_MS))

--!section reserve
-- The bucket may go into debt: a request that leaves it at -x (in 1/d tokens) is scheduled x/p
-- microseconds after now, if the wait is within max_wait and the debt at most MAX_EXACT - full
-- (every value stays exact). With not_before (acquire_all: a later slot that every claim's key
-- can give), the permits arrive then: they are taken from what the bucket holds at not_before,
-- at most full, so from at most full - (not_before - now) * p now.
--!use load
local charged = level
if not_before > now then
  local span = not_before - now
  local longest = IDIV(MAX_EXACT, p)
  if span > longest then
    charged = -MAX_EXACT  -- a debt no value keeps exact: denied below
  elseif full - span * p < charged then
    charged = full - span * p
  end
end
local after = charged - cost
slot, slot_f = now, 0
if after < 0 then
  local debt_us = IDIV(-after, p)
  slot, slot_f = now + debt_us, -after - debt_us * p
end
if slot < not_before then slot, slot_f = not_before, 0 end
wait = slot - now
if slot_f > 0 then wait = wait + 1 end
allowed = wait <= max_wait and -after <= MAX_EXACT - full
if allowed then level = charged end
--!use outcome
--!use until_full
if not allowed then retry = wait end

--!section cancel
-- Pays the reservation's n tokens back in the terms of the limit in force (the key carried over
-- to it, at most full); the waiters behind move by the shorter of their time at its rate and
-- the reservation's own step (waiters_shift); the backlog ended when the debt was paid.
--!use load
if not stale then
  verdict = cancel_verdict(log, version, cancels, epoch, now, reserved_p, slot, slot_f, cancelled,
                           reserved_epoch, cancels_before)
end
if verdict == 'returned' then
  local backlog_end = now
  if level < 0 then
    local debt_us = CEIL_DIV(-level, p)
    backlog_end = now + debt_us
  end
  level = level + cost
  if level > full then level = full end
  cancels = cancels + 1
  shift, shift_f, shift_p = waiters_shift(n, d, p, reserved_d, reserved_p)
  log_cancel(log, now, cancels, cancelled, shift, shift_f, shift_p, backlog_end)
  local left = level
  --!use until_full
  if reset < 1 then reset = 1 end
  --!use write
end

--!section adjust
-- refund: n tokens back, never beyond full; give_back: what the take at taken_at may still hold,
-- n tokens less the refill since, and nothing while the bucket is in debt (a reservation made
-- since keeps its slot); penalize: n tokens taken, below zero as a debt (at
-- most the debt a level may carry); block: the level at most d - (until - now) * p, so that one
-- token is there at until and none before (the caller checks that the debt fits).
--!use load
local to = level
if op == 'refund' then
  to = level + cost
  if to > full then to = full end
elseif op == 'give_back' then
  -- What the take may still hold: n tokens less the refill since (elapsed * p in 1/d token).
  local refilled_by = CEIL_DIV(cost, p)  -- the refill has returned the whole take after this
  if elapsed_since_take < refilled_by and taken_at <= now and not rewrite and level >= 0 then
    to = level + cost - elapsed_since_take * p
    if to > full then to = full end
  end
elseif op == 'penalize' then
  to = level - cost
  if to < full - MAX_EXACT then to = full - MAX_EXACT end
else
  local lowest = d - (until_us - now) * p
  if lowest < to then to = lowest end
end
apply = function()
  local taken = 0
  level = to
  --!use write
end
