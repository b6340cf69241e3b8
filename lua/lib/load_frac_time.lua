-- Loads the stored time of a gcra or leaky_bucket key `key` (GCRA's TAT, the leaky bucket's
-- next departure), or now if that is later. Statements, not a function: included by the
-- algorithms' fragments (a lean script defines no function); lib/frac_time.lua describes the
-- stored value. Needs p, d, burst and the policy epoch pv, since, sent_since, carry (the
-- shapes'), and `departures` (the includer's: true for a leaky bucket's next departure, false
-- for a TAT).
--
-- The stamp is read by lib/stamp_rule.lua: a newer policy version than pv (pv > 0) sets `stale`
-- (the shape refuses the request); a state it restamps sets `rewrite`, and with other
-- parameters, or a reset (for pv 0: a reset due), it is carried over at since, with the carry
-- the rule leaves (a reset not due is as_is). A TAT, and a next departure
-- carried proportionally or reset: the permits available then under its stamp,
-- A = burst' - ceil((time - since) / T') (burst', T' the stamp's), become A'
-- (lib/carry_permits.lua), and the state is rebuilt at since holding A':
-- time = since + (burst - A') * T, exact in 1/p us. A next departure carried as is: the permits
-- queued at since stay queued and depart at the new rate from since (lib/keep_queue.lua), so
-- that a change of the queue size alone never moves it. A rewritten state is written back under
-- the new stamp, also when denied. An old-format value (no stamp) is read as before (a fraction
-- counted in another unit than 1/p us is rounded up to the next whole us: that can only make it
-- stricter) and sets `rewrite`.
--
-- A clock step backwards: a value records the time it was written (its `now`); one written
-- later than now is a clock step, and the stored time moves back by (written - now): the
-- backlog it held at the write is kept, measured from the write, nothing is freed, and the
-- state is written back (`rewrite`) so that the backlog drains from now on; a time far ahead
-- in such a value is a debt (Limiter::penalize, block) and is kept. A value of the previous
-- release (9 fields, no write time), or of an older one, keeps the horizon rule: the latest
-- time this policy can store at now is now + burst*T, and a TAT on a key acquire() reserved on
-- (version > 0) up to `reserved_reach` us more (the longest reservation wait; a leaky bucket's
-- queue holds its reservations). A later stored time can only come from a clock that stepped
-- back: it is taken as that latest time (the state's own horizon: nothing is freed, the key is
-- full) and written back, so that the lock lasts at most that horizon, not the whole step.
--
-- Leaves stored (the value read), stored_time and stored_f (whole us, fraction in 1/p us),
-- version, cancels and epoch (0 on a key nobody reserved on), and stamp_pv (the version field
-- of the stamp to write, lib/stamp_rule.lua).
local reserved_reach = 0
if not departures then reserved_reach = MAX_EXACT - now end  -- lua/reserve.lua's longest wait
local stored_time, stored_f = now, 0
local version, cancels, epoch = 0, 0, 0
local timed = false  -- the value records its write time: no horizon rule (a debt is kept)
-- The stored value's fields; us stays nil without a stamped value (none, or an older format).
local us, f, den, sd, sb, spv, written
local stored = redis.call('GET', key)
if stored then
  local s_version, s_cancels, s_epoch
  local known = MEMO and MEMO[stored]  -- a value this batch read or wrote (lua/batch.lua, MEMO)
  if known then
    us, f, den, s_version, s_cancels, s_epoch, sd, sb, spv, written = known[1], known[2],
        known[3], known[4], known[5], known[6], known[7], known[8], known[9], known[10]
  else
    us, f, den, s_version, s_cancels, s_epoch, sd, sb, spv, written = string.match(stored,
        '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):?(%d*)$')
    if MEMO and us then
      MEMO[stored] = {us, f, den, s_version, s_cancels, s_epoch, sd, sb, spv, written}
    end
  end
  if us then
    us, f, den = tonumber(us), tonumber(f), tonumber(den)
    written = tonumber(written)  -- nil in a value of the previous release
    version, cancels, epoch = tonumber(s_version), tonumber(s_cancels), tonumber(s_epoch)
    sd, sb, spv = tonumber(sd), tonumber(sb), tonumber(spv)
  end
end
local other = us ~= nil and (den ~= p or sd ~= d or sb ~= burst)
--!include stamp_rule.lua
if us then
  timed = written ~= nil
  local stepped = written and written > now
  if stepped then us = us - (written - now) end  -- a clock step: the write's backlog, from now
  if restamp then rewrite = true end
  -- Only a change of parameters, or a reset, converts: a new version of the same parameters
  -- keeps the state exactly (with its fraction of a permit).
  if restamp and (other or carry == 2) then
    if departures and carry == 0 then
      --!include keep_queue.lua
    else
      local available = sb
      if us > since or (us == since and f > 0) then
        local units = MAX_EXACT  -- (time - since) in 1/den us, at most 2^52
        if (us - since) * den + f <= MAX_EXACT then units = (us - since) * den + f end
        local queued = CEIL_DIV(units, sd)
        available = sb - queued
      end
      local old_cap, new_cap = sb, burst
      --!include carry_permits.lua
      local least = IDIV(MAX_EXACT, d)  -- (burst - carried) * d stays at most 2^52
      least = burst - least
      if carried < least then carried = least end
      local span = (burst - carried) * d
      local q = IDIV(span, p)
      us, f, den = since + q, span - q * p, p
    end
  end
  if stepped then rewrite = true end
elseif stored then
  us, f = tonumber(stored), 0
  if not us then
    --!include split.lua
    us, f, den = fields[1], fields[2] or 0, fields[3]
    if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
    if f > 0 and den ~= p then us, f = us + 1, 0 end
  end
  rewrite = true
end
if stored then
  if us > now or (us == now and f > 0) then
    stored_time, stored_f = us, f
  end
  if not timed and (us > now or (us == now and f > 0)) then
    -- Beyond now + burst*T (+ reserved_reach), compared in 1/p us without a division (a
    -- product past 2^53 is inexact, but then far beyond burst*d <= 2^52).
    local beyond = us - now
    if version > 0 then beyond = beyond - reserved_reach end
    if beyond * p + f > burst * d then
      local reach = IDIV(burst * d, p)
      stored_time, stored_f = now + reach, burst * d - reach * p
      if version > 0 then stored_time = stored_time + reserved_reach end
      rewrite = true
    end
  end
end
