-- Loads the stored time of a gcra or leaky_bucket key `key` (GCRA's TAT, the leaky bucket's
-- next departure), or now if that is later. Statements, not a function: included by the
-- algorithms' fragments (a lean script defines no function); lib/frac_time.lua describes the
-- stored value. A fraction counted in another unit than
-- 1/p us is rounded up to the next whole us: that can only make it stricter.
--
-- Leaves stored (the value read), stored_time and stored_f (whole us, fraction in 1/p us),
-- version, cancels and epoch (0 on a key nobody reserved on).
local stored_time, stored_f = now, 0
local version, cancels, epoch = 0, 0, 0
local stored = redis.call('GET', key)
if stored then
  local us, f = tonumber(stored), 0
  if not us then
    local den
    --!include split.lua
    us, f, den = fields[1], fields[2] or 0, fields[3]
    if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
    if f > 0 and den ~= p then us, f = us + 1, 0 end
  end
  if us > now or (us == now and f > 0) then stored_time, stored_f = us, f end
end
