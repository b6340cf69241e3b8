-- Token bucket: tokens refill continuously at p per d us up to `burst`; a request for n permits
-- takes n tokens. Tokens are counted in units of 1/d token so that refill is exact. The key
-- holds "level:last:d". Model: src/algorithms/token_bucket.cpp.

local function token_bucket(key, now, n, p, d, burst)
  local full = burst * d
  local level, last = full, now
  local stored = redis.call('GET', key)
  if stored then
    local den
    level, last, den = split_value(stored)
    -- A level counted in another unit keeps its tokens, rounded down (never adds any).
    if den ~= d then level = muldiv(level, d, den) end
    if level > full then level = full end
  end
  local t = now
  if last > t then t = last end
  local missing = full - level
  if missing > 0 then
    local elapsed = t - last
    if elapsed >= ceil_div(missing, p) then level = full else level = level + elapsed * p end
  end
  local cost = n * d
  if level >= cost then
    local left = level - cost
    local reset = ceil_div(full - left, p)
    local value = string.format('%d:%d:%d', left, t, d)
    return true, burst, idiv(left, d), 0, reset, t, function() store(key, value, reset) end
  end
  return false, burst, idiv(level, d), ceil_div(cost - level, p), ceil_div(full - level, p), t
end

ALGORITHMS['token_bucket'] = token_bucket
