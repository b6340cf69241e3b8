-- GCRA (generic cell rate algorithm): one key holds the theoretical arrival time (TAT), the
-- time at which the limit would be idle again. Emission interval T = d/p us (the rate reduced to
-- lowest terms), capacity tau = burst * T. A request for n permits passes when
-- max(TAT, now) + n*T <= now + tau.
--
-- Stored value: the TAT in whole microseconds (an integer, so Redis keeps it int-encoded), or
-- "us:f:p" when it has a fraction f/p of a microsecond. A value stored under another rate
-- denominator is rounded up to a whole microsecond: that can only make the limit stricter.
-- Time needs no separate last-seen value: the TAT never moves back, and now only enters through
-- max(TAT, now), so a clock step backwards can only make a request wait longer.

local function gcra_load(key, now, p)
  local stored = redis.call('GET', key)
  if not stored then return now, 0 end
  local colon = string.find(stored, ':', 1, true)
  local us, f = tonumber(stored), 0
  if colon then
    local second = string.find(stored, ':', colon + 1, true)
    us = tonumber(string.sub(stored, 1, colon - 1))
    f = tonumber(string.sub(stored, colon + 1, second - 1))
    if tonumber(string.sub(stored, second + 1)) ~= p then
      us, f = ceil_us(us, f), 0
    end
  end
  if us > now or (us == now and f > 0) then return us, f end
  return now, 0
end

local function gcra(key, now, n, p, d, burst)
  local tat, tat_f = gcra_load(key, now, p)
  local step, step_f = scaled(n, d, p)
  local new, new_f = tat + step, tat_f + step_f
  if new_f >= p then new, new_f = new + 1, new_f - p end
  local cap, cap_f = scaled(burst, d, p)
  local limit, limit_f = now + cap, cap_f  -- the latest TAT the limit allows: now + tau
  local allowed = new < limit or (new == limit and new_f <= limit_f)
  -- Permits that still fit after this decision: floor((now + tau - TAT) / T), in units of 1/p us.
  local left_tat, left_f = tat, tat_f
  if allowed then left_tat, left_f = new, new_f end
  local remaining = idiv((limit - left_tat) * p + limit_f - left_f, d)
  if allowed then
    local ttl_us = ceil_us(new - now, new_f)
    local value = new
    if new_f > 0 then value = string.format('%d:%d:%d', new, new_f, p) end
    return true, burst, remaining, 0, ttl_us, value, ceil_div(ttl_us, 1000)
  end
  -- Denied: the request passes once now' + tau >= new, i.e. after new - tau - now.
  local wait, wait_f = new - limit, new_f - limit_f
  if wait_f < 0 then wait, wait_f = wait - 1, wait_f + p end
  return false, burst, remaining, ceil_us(wait, wait_f), ceil_us(tat - now, tat_f)
end

ALGORITHMS['gcra'] = gcra
