-- decide_gcra: lua/decide.lua for its most common call, try_acquire on a policy of one gcra
-- limit, with the same decision and the same stored state (lua/algorithms/gcra.lua, stored as
-- lib/frac_time.lua describes). Model: src/algorithms/gcra.cpp.
--
-- Why a script of its own: EVALSHA runs a script's whole body on every call, so every local
-- function decide.lua and its includes define is created again per call, and its generality
-- (any policy, peek) costs table and closure work per call. This one defines no function and
-- builds no table but the fields of a fractional stored value, so it costs little more than its
-- three Redis calls.
--
-- Arguments as lib/lean_arguments.lua describes; the limit's fields:
-- ARGV[3]  p, ARGV[4] d (the rate in lowest terms: one permit every d/p us), ARGV[5] burst
--
-- Returns decide.lua's reply less the binding (always 0), as one string of integers separated
-- by spaces: "allowed (0/1) now_us limit remaining retry_after_us reset_after_us".
-- Why a string: a table of integers costs Redis a reply per element and hiredis an object per
-- element; one string measured cheaper on both sides.

local lean_script, lean_fields = 'decide_gcra', 'p >= 1, d >= 1, burst >= 0'
--!include lib/lean_arguments.lua
local p, d, burst = field1, field2, field3

-- The TAT: the stored one, or now if that is later.
--!include lib/lean_frac_time.lua
local tat, tat_f = stored_time, stored_f

-- n*T and tau = burst*T as (whole us, fraction in 1/p us). floor(x / p) of doubles can round
-- up to the next integer when the quotient is very close to it: corrected by one either way.
local step, step_f, cap, cap_f = n * d, 0, burst * d, 0
if p > 1 then
  local q = floor(step / p)
  if q * p > step then q = q - 1 elseif (q + 1) * p <= step then q = q + 1 end
  step, step_f = q, step - q * p
  q = floor(cap / p)
  if q * p > cap then q = q - 1 elseif (q + 1) * p <= cap then q = q + 1 end
  cap, cap_f = q, cap - q * p
end
local new, new_f = tat + step, tat_f + step_f
if new_f >= p then new, new_f = new + 1, new_f - p end
local latest = now + cap  -- the latest TAT the limit allows: now + tau, fraction cap_f
local allowed = new < latest or (new == latest and new_f <= cap_f)

-- Permits left after this decision: floor(room / d), room in 1/p us.
local room
if allowed then room = (latest - new) * p + cap_f - new_f else
  room = (latest - tat) * p + cap_f - tat_f
end
local remaining = 0
if room > 0 then
  remaining = floor(room / d)
  if remaining * d > room then remaining = remaining - 1
  elseif (remaining + 1) * d <= room then remaining = remaining + 1 end
end

if allowed then
  local ttl = new - now
  if new_f > 0 then ttl = ttl + 1 end
  -- Why strings: Redis 7.0 converts a number argument of redis.call with printf's %.17g, which
  -- costs more than Lua's integer formatting (%d, exact below 2^53).
  local value
  if version > 0 then
    value = string.format('%d:%d:%d:%d:%d:%d', new, new_f, p, version, cancels, epoch)
  elseif new_f > 0 then
    value = string.format('%d:%d:%d', new, new_f, p)
  else
    value = string.format('%d', new)
  end
  -- The TTL in whole milliseconds, rounded up: ceil(ttl / 1000), ttl >= 1.
  local ms = floor((ttl + 999) / 1000)
  if ms * 1000 > ttl + 999 then ms = ms - 1 elseif (ms + 1) * 1000 <= ttl + 999 then ms = ms + 1 end
  redis.call('SET', key, value, 'PX', string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', now, burst, remaining, ttl)
end
-- Denied: the request passes once now' + tau >= new, i.e. after new - tau - now.
local wait, wait_f = new - latest, new_f - cap_f
if wait_f < 0 then wait, wait_f = wait - 1, wait_f + p end
if wait_f > 0 then wait = wait + 1 end
local reset = tat - now
if tat_f > 0 then reset = reset + 1 end
return string.format('0 %d %d %d %d %d', now, burst, remaining, wait, reset)
