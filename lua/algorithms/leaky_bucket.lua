-- Leaky bucket, a shaper: departures are spaced exactly T = d/p us apart; at most `burst`
-- permits may be queued. The key holds the time the next departure may leave, stored as GCRA
-- stores its TAT (lib/frac_time.lua). A request is admitted only when it can leave now; it then
-- occupies the next n*T. Model: src/algorithms/leaky_bucket.cpp.
--!params p, d, burst
--!checks p >= 1, d >= 1, burst >= 0

--!section decide
--!include ../lib/load_frac_time.lua
local free, free_f = stored_time, stored_f
allowed = free == now and free_f == 0
capacity = burst
local new, new_f
if allowed then
  -- It leaves now and occupies the next n*T = n*d/p us (whole us, fraction in 1/p us).
  local step, step_f = n * d, 0
  if p > 1 then
    local q = IDIV(step, p)
    step, step_f = q, step - q * p
  end
  new, new_f = now + step, step_f
  remaining = burst - n
  reset = step
  if step_f > 0 then reset = reset + 1 end
else
  local wait, wait_f = free - now, free_f
  -- Permits queued ahead: ceil(wait / T); more than the queue holds only after a clock step.
  local cap = IDIV(burst * d, p)
  if wait <= cap then
    local queued = CEIL_DIV(wait * p + wait_f, d)
    remaining = burst - queued
    if remaining < 0 then remaining = 0 end
  end
  retry = wait
  if wait_f > 0 then retry = retry + 1 end
  reset = retry
end

--!section idle
if allowed then reset = 0 end

--!section write
--!include ../lib/frac_time_value.lua
local ms = CEIL_DIV(reset, 1000)  -- the TTL in whole milliseconds, rounded up
redis.call('SET', key, value, 'PX', string.format('%d', ms + TTL_EXTRA_MS))
