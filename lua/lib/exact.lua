-- Exact integer arithmetic on Lua numbers (doubles). Every value a script handles stays at or
-- below 2^52, where doubles hold integers exactly; the C++ side validates arguments so that it
-- does. Times are microseconds; a time with a fraction is a pair (us, f) meaning us + f/p.

local floor = math.floor

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

local MAX_EXACT = 4503599627370496  -- 2^52
