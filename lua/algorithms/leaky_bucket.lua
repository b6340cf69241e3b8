-- Leaky bucket, a shaper: departures are spaced exactly T = d/p us apart; at most `burst`
-- permits may be queued. The key holds the time the next departure may leave, stored as GCRA
-- stores its TAT. A request is admitted only when it can leave now; it then occupies the next
-- n*T. Model: src/algorithms/leaky_bucket.cpp. Needs lib/frac_time.lua.
--
-- lua/decide_leaky_bucket.lua is this algorithm inlined into a script of its own (try_acquire on a
-- single leaky_bucket limit): a change here goes there too. The differential test runs both.

local function leaky_bucket(key, now, n, p, d, burst)
  local free, free_f, book = load_frac_time(key, now, p)
  if free == now and free_f == 0 then
    local step, step_f = scaled(n, d, p)
    local ttl = ceil_us(step, step_f)
    local value = frac_time_value(now + step, step_f, p, book)
    return true, burst, burst - n, 0, ttl, now, function() store(key, value, ttl) end
  end
  local wait, wait_f = free - now, free_f
  -- Permits queued ahead: ceil(wait / T); more than the queue holds only after a clock step.
  local remaining = 0
  local cap = scaled(burst, d, p)
  if wait <= cap then
    remaining = burst - ceil_div(wait * p + wait_f, d)
    if remaining < 0 then remaining = 0 end
  end
  local retry = ceil_us(wait, wait_f)
  return false, burst, remaining, retry, retry, now
end

ALGORITHMS['leaky_bucket'] = leaky_bucket
