-- ARGV[2] (permits) and ARGV[3] (now in microseconds, for tests only, or '' to use the server's
-- TIME), as lua/shapes/general.lua and lua/reserve.lua take them (statements). With an
-- injected time, keys live an hour longer than their state matters (TTL_EXTRA_MS), because
-- Redis expires them on its own clock, not on the injected one.
--
-- Leaves permits and now.
local permits = integer_arg(ARGV[2], 'permits', 1, MAX_EXACT)
local now
if ARGV[3] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = integer_arg(ARGV[3], 'now', 0, MAX_EXACT)
  TTL_EXTRA_MS = 3600000
end
