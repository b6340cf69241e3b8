-- Exact integer arithmetic on Lua numbers (doubles), as functions, for the scripts that are not
-- generated per algorithm (reserve, semaphore). Times are microseconds; a time with a fraction
-- is a pair (us, f) meaning us + f/p. src/algorithms/exact.hpp is the C++ twin of this file.
--!include numbers.lua

-- ceil(a / b) for integers a >= 0, b > 0.
local function ceil_div(a, b)
  local q = CEIL_DIV(a, b)
  return q
end

-- n * d / p as a time pair (whole microseconds, fraction in 1/p us).
local function scaled(n, d, p)
  local x = n * d
  local q = IDIV(x, p)
  return q, x - q * p
end

-- Whole microseconds of the pair, rounded up.
local function ceil_us(us, f)
  if f > 0 then return us + 1 end
  return us
end

--!include integer_arg.lua

-- The integers of a stored "a[:b[:c[:d[:e[:f]]]]]" value.
local function split_value(stored)
  --!include split.lua
  return fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]
end
