-- The stored time of a gcra or leaky_bucket key, or now if that is later (load_frac_time in
-- lib/frac_time.lua), for the lean decide scripts (included as statements; see
-- lib/lean_arguments.lua). A value that is not a plain integer is "us:f:den" or
-- "us:f:den:version:cancels:epoch"; a fraction counted in another unit than 1/p us is rounded
-- up to the next whole us.
--
-- Leaves key, stored_time and stored_f (whole us, fraction in 1/p us), version, cancels, epoch.
local key = KEYS[1]
local stored_time, stored_f = now, 0
local version, cancels, epoch = 0, 0, 0
local stored = redis.call('GET', key)
if stored then
  local us, f = tonumber(stored), 0
  if not us then
    local den
--!include lean_split.lua
    us, f, den = fields[1], fields[2] or 0, fields[3]
    if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
    if f > 0 and den ~= p then us, f = us + 1, 0 end
  end
  if us > now or (us == now and f > 0) then stored_time, stored_f = us, f end
end
