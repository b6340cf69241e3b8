-- GCRA (generic cell rate algorithm): one key holds the theoretical arrival time (TAT), the
-- time at which the limit would be idle again. Emission interval T = d/p us (the rate reduced to
-- lowest terms), capacity tau = burst * T. A request for n permits passes when
-- max(TAT, now) + n*T <= now + tau. Model: src/algorithms/gcra.cpp.
--
-- lua/decide_gcra.lua is this algorithm inlined into a script of its own (try_acquire on a single
-- gcra limit, the common call): a change here goes there too. The differential test runs both.
--
-- The TAT is stored as lib/frac_time.lua describes. Time needs no separate last-seen value: the TAT never moves back, and now only enters through
-- max(TAT, now), so a clock step backwards can only make a request wait longer.

local function gcra(key, now, n, p, d, burst)
  local tat, tat_f, book = load_frac_time(key, now, p)
  local step, step_f = scaled(n, d, p)
  local new, new_f = tat + step, tat_f + step_f
  if new_f >= p then new, new_f = new + 1, new_f - p end
  local cap, cap_f = scaled(burst, d, p)
  local latest, latest_f = now + cap, cap_f  -- the latest TAT the limit allows: now + tau
  local allowed = new < latest or (new == latest and new_f <= latest_f)
  local left, left_f = tat, tat_f
  if allowed then left, left_f = new, new_f end
  local room = (latest - left) * p + latest_f - left_f
  local remaining = 0
  if room > 0 then remaining = idiv(room, d) end
  if allowed then
    local ttl = ceil_us(new - now, new_f)
    local value = frac_time_value(new, new_f, p, book)
    return true, burst, remaining, 0, ttl, now, function() store(key, value, ttl) end
  end
  -- Denied: the request passes once now' + tau >= new, i.e. after new - tau - now.
  local wait, wait_f = new - latest, new_f - latest_f
  if wait_f < 0 then wait, wait_f = wait - 1, wait_f + p end
  return false, burst, remaining, ceil_us(wait, wait_f), ceil_us(tat - now, tat_f), now
end

ALGORITHMS['gcra'] = gcra
