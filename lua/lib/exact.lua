-- Exact integer arithmetic on Lua numbers (doubles). Every value a script handles stays at or
-- below 2^52, where doubles hold integers exactly; the C++ side validates arguments so that it
-- does. Times are microseconds; a time with a fraction is a pair (us, f) meaning us + f/p.
-- src/algorithms/exact.hpp is the C++ twin of this file.

local floor = math.floor
local MAX_EXACT = 4503599627370496  -- 2^52

-- floor(a / b) for integers a >= 0, b > 0. The double quotient can round up to the next
-- integer when it is very close to it, so correct it by one either way.
local function idiv(a, b)
  local q = floor(a / b)
  if q * b > a then return q - 1 end
  if (q + 1) * b <= a then return q + 1 end
  return q
end

-- ceil(a / b) for integers a >= 0, b > 0.
local function ceil_div(a, b)
  return idiv(a + b - 1, b)
end

-- floor(a * b / c) and the remainder, for integers 0 <= a, b <= 2^52 and 0 < c <= 2^46 whose
-- quotient is below 2^52. When a * b would pass 2^52, it works in 5-bit digits of b so that
-- every partial value stays below 2^52.
local function muldiv(a, b, c)
  if b == 0 or a <= MAX_EXACT / b then
    local x = a * b
    local q = idiv(x, c)
    return q, x - q * c
  end
  local qa = idiv(a, c)
  local ra = a - qa * c
  local digits, count, rest = {}, 0, b
  while rest > 0 do
    local high = idiv(rest, 32)
    count = count + 1
    digits[count] = rest - high * 32
    rest = high
  end
  local q, r = 0, 0
  for i = count, 1, -1 do
    r = r * 32 + ra * digits[i]
    local k = idiv(r, c)
    q = q * 32 + k
    r = r - k * c
  end
  return qa * b + q, r
end

-- ceil(a * b / c), as muldiv.
local function muldiv_ceil(a, b, c)
  local q, r = muldiv(a, b, c)
  if r > 0 then return q + 1 end
  return q
end

-- n * d / p as a time pair (whole microseconds, fraction in 1/p us).
local function scaled(n, d, p)
  local x = n * d
  local q = idiv(x, p)
  return q, x - q * p
end

-- Whole microseconds of the pair, rounded up.
local function ceil_us(us, f)
  if f > 0 then return us + 1 end
  return us
end

-- An integer argument in [low, high], or an error raised before any write.
local function integer_arg(value, name, low, high)
  local n = tonumber(value)
  if n == nil or n ~= floor(n) or n < low or n > high then
    error('redlimit: argument ' .. name .. ' must be an integer in [' .. low .. ', ' .. high ..
          '], got ' .. tostring(value))
  end
  return n
end

-- The integers of a stored "a[:b[:c[:d[:e[:f]]]]]" value.
local function split_value(stored)
--!include lean_split.lua
  return fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]
end

-- Sets a string key with a TTL in milliseconds (at least 1).
local function store(key, value, ttl_us)
  redis.call('SET', key, value, 'PX', ceil_div(ttl_us, 1000) + TTL_EXTRA_MS)
end
