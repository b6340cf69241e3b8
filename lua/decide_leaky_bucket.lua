-- decide_leaky_bucket: lua/decide.lua for try_acquire on a policy of one leaky_bucket limit,
-- with the same decision and the same stored state (lua/algorithms/leaky_bucket.lua, the next
-- departure time stored as lib/frac_time.lua describes). Model: src/algorithms/leaky_bucket.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds no table but the stored value's fields.
--
-- Arguments as lib/lean_arguments.lua describes; the limit's fields:
-- ARGV[3]  p, ARGV[4] d (the rate in lowest terms: one departure every d/p us), ARGV[5] burst
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us".
--
-- Every floor(a / b) below is the double quotient corrected by one either way (idiv in
-- lib/exact.lua), and ceil(a / b) is floor((a + b - 1) / b).

local lean_script, lean_fields = 'decide_leaky_bucket', 'p >= 1, d >= 1, burst >= 0'
--!include lib/lean_arguments.lua
local p, d, burst = field1, field2, field3

-- The next departure: the stored one, or now if that is later.
--!include lib/lean_frac_time.lua
local free, free_f = stored_time, stored_f

if free == now and free_f == 0 then
  -- Admitted: it leaves now and occupies the next n*T = n*d/p us (whole us, fraction in 1/p).
  local step, step_f = n * d, 0
  if p > 1 then
    local q = floor(step / p)
    if q * p > step then q = q - 1 elseif (q + 1) * p <= step then q = q + 1 end
    step, step_f = q, step - q * p
  end
  local ttl = step
  if step_f > 0 then ttl = ttl + 1 end
  -- Why strings: as in decide_gcra, Lua's %d costs Redis less than its %.17g of a number.
  local value
  if version > 0 then
    value = string.format('%d:%d:%d:%d:%d:%d', now + step, step_f, p, version, cancels, epoch)
  elseif step_f > 0 then
    value = string.format('%d:%d:%d', now + step, step_f, p)
  else
    value = string.format('%d', now + step)
  end
  -- The TTL in whole milliseconds, rounded up: ceil(ttl / 1000).
  local ms = floor((ttl + 999) / 1000)
  if ms * 1000 > ttl + 999 then ms = ms - 1 elseif (ms + 1) * 1000 <= ttl + 999 then ms = ms + 1 end
  redis.call('SET', key, value, 'PX', string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', now, burst, burst - n, ttl)
end
local wait, wait_f = free - now, free_f
-- Permits queued ahead: ceil(wait / T); more than the queue holds only after a clock step.
local remaining = 0
local cap = burst * d
if p > 1 then
  local q = floor(cap / p)
  if q * p > cap then q = q - 1 elseif (q + 1) * p <= cap then q = q + 1 end
  cap = q
end
if wait <= cap then
  local x = wait * p + wait_f + d - 1
  local queued = floor(x / d)
  if queued * d > x then queued = queued - 1
  elseif (queued + 1) * d <= x then queued = queued + 1 end
  remaining = burst - queued
  if remaining < 0 then remaining = 0 end
end
local retry = wait
if wait_f > 0 then retry = retry + 1 end
return string.format('0 %d %d %d %d %d', now, burst, remaining, retry, retry)
