-- Times with a fraction of a microsecond, (us, f) meaning us + f/p, and the stored state of the
-- GCRA and leaky bucket keys. Needs exact.lua. C++ twin: src/algorithms/exact.hpp, gcra.cpp.
--
-- Stored value: the time in whole microseconds (an integer, so Redis keeps it int-encoded), or
-- "us:f:p" when it has a fraction f/p of a microsecond, or "us:f:p:version:cancels:epoch" once
-- acquire() reserved on the key (see reservations/cancel.lua). A time stored under another
-- denominator is rounded up to a whole microsecond: that can only make it stricter.

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

-- The reservation bookkeeping of a key nobody reserved on (shared: never modified).
local NO_BOOK = {0, 0, 0}

-- The stored time of a key, or now if that is later, and its reservation bookkeeping (a
-- table {version, cancels, epoch}, see reservations/cancel.lua).
local function load_frac_time(key, now, p)
  local stored = redis.call('GET', key)
  if not stored then return now, 0, NO_BOOK end
  local us, f, den, version, cancels, epoch = split_value(stored)
  f = f or 0
  local book = NO_BOOK
  if version then book = {version, cancels or 0, epoch or 0} end
  if f > 0 and den ~= p then us, f = us + 1, 0 end
  if after_frac(us, f, now, 0) then return us, f, book end
  return now, 0, book
end

local function frac_time_value(us, f, p, book)
  if book[1] > 0 then
    return string.format('%d:%d:%d:%d:%d:%d', us, f, p, book[1], book[2], book[3])
  end
  if f > 0 then return string.format('%d:%d:%d', us, f, p) end
  return us
end
