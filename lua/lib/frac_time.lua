-- Times with a fraction of a microsecond, (us, f) meaning us + f/p, and the stored state of the
-- GCRA and leaky bucket keys. Needs exact.lua. C++ twin: src/algorithms/exact.hpp, gcra.cpp.
--
-- Stored value: the time in whole microseconds (an integer, so Redis keeps it int-encoded), or
-- "us:f:p:version" when it has a fraction f/p of a microsecond or once acquire() reserved on
-- the key (the version counts reservations and cancellations; see reservations/). A time
-- stored under another denominator is rounded up to a whole microsecond: only stricter.

local function add_frac(a, af, b, bf, p)
  local us, f = a + b, af + bf
  if f >= p then return us + 1, f - p end
  return us, f
end

-- a - b; may be negative in whole microseconds (the fraction stays in [0, p)).
local function sub_frac(a, af, b, bf, p)
  local us, f = a - b, af - bf
  if f < 0 then return us - 1, f + p end
  return us, f
end

-- True if (a, af) > (b, bf).
local function after_frac(a, af, b, bf)
  return a > b or (a == b and af > bf)
end

-- The stored time of a key, or now if that is later, and its version.
local function load_frac_time(key, now, p)
  local stored = redis.call('GET', key)
  if not stored then return now, 0, 0 end
  local us, f, den, version = split_value(stored)
  f, version = f or 0, version or 0
  if f > 0 and den ~= p then us, f = us + 1, 0 end
  if after_frac(us, f, now, 0) then return us, f, version end
  return now, 0, version
end

local function frac_time_value(us, f, p, version)
  if f > 0 or version > 0 then return string.format('%d:%d:%d:%d', us, f, p, version) end
  return us
end
