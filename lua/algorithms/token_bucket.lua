-- Token bucket: tokens refill continuously at p per d us up to `burst`; a request for n permits
-- takes n tokens. Tokens are counted in units of 1/d token so that refill is exact. The key
-- holds the level as lib/tokens.lua describes. Model: src/algorithms/token_bucket.cpp.
--
-- lua/decide_token_bucket.lua is this algorithm inlined into a script of its own (try_acquire on a
-- single token_bucket limit): a change here goes there too. The differential test runs both.

local function token_bucket(key, now, n, p, d, burst)
  local full = burst * d
  local level, t, book = load_tokens(key, now, p, d, full)
  local cost = n * d
  local lag = t - now  -- after a clock step back, times count from now, not from t
  if level >= cost then
    local left = level - cost
    local reset = ceil_div(full - left, p) + lag
    local value = tokens_value(left, t, d, book)
    return true, burst, idiv(left, d), 0, reset, t, function() store(key, value, reset) end
  end
  local remaining = 0
  if level > 0 then remaining = idiv(level, d) end
  return false, burst, remaining, ceil_div(cost - level, p) + lag, ceil_div(full - level, p) + lag,
         t
end

ALGORITHMS['token_bucket'] = token_bucket
