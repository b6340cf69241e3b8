-- The time of a script call (statements): `now_arg`, which the including script sets to its
-- ARGV element, is now in microseconds, for tests only, or '' to use the server's TIME. With an
-- injected time, keys live an hour longer than their state matters (TTL_EXTRA_MS), because
-- Redis expires them on its own clock, not on the injected one.
--
-- Leaves now.
local now
if now_arg == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = integer_arg(now_arg, 'now', 0, MAX_EXACT)
  TTL_EXTRA_MS = 3600000
end
