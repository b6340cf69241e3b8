-- Loads a token bucket key `key`: the level at now after refilling (statements, as
-- lib/load_frac_time.lua). Needs full = burst * d and the policy epoch pv, since, sent_since,
-- carry (the shapes').
--
-- The stored value: "level:last:d:version:cancels:epoch:p:burst:pv", written by
-- lib/tokens_value.lua: the level in units of 1/d token (negative: a debt of reservations) at
-- time last, the reservation bookkeeping (0:0:0 until acquire() reserved on the key, see
-- reservations/cancel.lua) and the stamp: the parameters d, p, burst and the policy version pv
-- it was written under (pv 0: the reset tag, lib/stamp_rule.lua). The previous release wrote
-- "level:last:d" or "level:last:d:version:cancels:epoch" (no stamp): read as before (a level
-- counted in another unit keeps its whole tokens, or its whole debt rounded up) and rewritten
-- (`rewrite`).
-- The stamp is read by lib/stamp_rule.lua: a newer policy version than pv (pv > 0) sets
-- `stale`; a state it restamps sets `rewrite`, and with other parameters, or a reset (for pv 0:
-- a reset due), it is carried over at since, with the carry the rule leaves (a reset not due is
-- as_is): the whole permits A available then under its stamp become A' (lib/carry_permits.lua),
-- the level A' x d at since, refilled at the new rate from there. A state last written before
-- since is refilled to since at its stamp's rate. One last written after since (a process that
-- had not heard of the change yet decided under the old version) is projected back to since:
-- the refill its rate credited over (since, last] is taken off, a debt if it comes to that
-- (what the late write took stays taken), so the conversion is stricter than the state at
-- since, never looser. C++ twin: src/algorithms/token_bucket.cpp.
--
-- When the Redis clock steps back: a state is never written with a last refill later than the
-- now it was decided at, so a later one is a clock step. It is taken as now (no refill for the
-- step, and the tokens used stay used) and written back (`rewrite`), so the key is locked for
-- at most the bucket's own refill, not the whole step.
--
-- Leaves level (in 1/d token), last, version, cancels and epoch, and stamp_pv (the version
-- field of the stamp to write, lib/stamp_rule.lua).
local level, last = full, now
local version, cancels, epoch = 0, 0, 0
-- The stored value's fields; s_level stays nil without a stamped value (none, or an older
-- format).
local s_level, s_last, den, sp, sb, spv
local stored = redis.call('GET', key)
if stored then
  local s_version, s_cancels, s_epoch
  local known = MEMO and MEMO[stored]  -- a value this batch read or wrote (lua/batch.lua, MEMO)
  if known then
    s_level, s_last, den, s_version, s_cancels, s_epoch, sp, sb, spv = known[1], known[2],
        known[3], known[4], known[5], known[6], known[7], known[8], known[9]
  else
    s_level, s_last, den, s_version, s_cancels, s_epoch, sp, sb, spv =
        string.match(stored, '^(%-?%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)$')
    if MEMO and s_level then
      MEMO[stored] = {s_level, s_last, den, s_version, s_cancels, s_epoch, sp, sb, spv}
    end
  end
  if s_level then
    level, last, den = tonumber(s_level), tonumber(s_last), tonumber(den)
    version, cancels, epoch = tonumber(s_version), tonumber(s_cancels), tonumber(s_epoch)
    sp, sb, spv = tonumber(sp), tonumber(sb), tonumber(spv)
  end
end
local other = s_level ~= nil and (den ~= d or sp ~= p or sb ~= burst)
--!include stamp_rule.lua
if s_level then
  if restamp then rewrite = true end
  -- Only a change of parameters, or a reset, converts: a new version of the same parameters
  -- keeps the level exactly (with its fraction of a token).
  if restamp and (other or carry == 2) then
    local old_full = sb * den
    if level > old_full then level = old_full end
    if last > since then
      -- Written after since under the old version: the refill its rate credited since then
      -- is taken off, a debt if it comes to that (at most the most a level may carry).
      local most_debt = MAX_EXACT - old_full
      local longest = IDIV(MAX_EXACT, sp)  -- the longest span whose refill stays exact
      local span = last - since
      if span > longest then level = -most_debt else level = level - span * sp end
      if level < -most_debt then level = -most_debt end
    else
      local missing = old_full - level
      if missing > 0 then
        local refill = CEIL_DIV(missing, sp)  -- full again after this many us
        local span = since - last
        if span >= refill then level = old_full else level = level + span * sp end
      end
    end
    local available = IDIV(level, den)  -- floor, also of a debt
    local old_cap, new_cap = sb, burst
    --!include carry_permits.lua
    local most = IDIV(MAX_EXACT - full, d)  -- the most debt a level may carry, in tokens
    if carried < -most then carried = -most end
    level, last = carried * d, since
  end
elseif stored then
  --!include split.lua
  den = fields[3]
  level, last = fields[1], fields[2]
  if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
  if den ~= d then
    if level >= 0 then
      local tokens = IDIV(level, den)
      if tokens * d >= full then level = full else level = tokens * d end
    else
      local debt = CEIL_DIV(-level, den)
      local max_debt = MAX_EXACT - full  -- the most debt a level may carry
      local most = IDIV(max_debt, d)
      if debt > most then level = -max_debt else level = -debt * d end
    end
  end
  rewrite = true
end
if level > full then level = full end
if last > now then
  last = now
  rewrite = true
end
local missing = full - level
if missing > 0 then
  local refill = CEIL_DIV(missing, p)  -- full again after this many us
  if now - last >= refill then level = full else level = level + (now - last) * p end
end
