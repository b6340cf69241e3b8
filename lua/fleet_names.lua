-- fleet_names: records the limiter names whose counts a client just added to the fleet's
-- (StatsPublisher, after lua/fleet_counts.lua), so that `redlimit watch` finds every name
-- without scanning the keyspace. Names not published for the TTL are dropped, and the set
-- itself expires a TTL after its last write, as every redlimit key does.
--
-- KEYS[1]  `<prefix>:stats:names`, a sorted set: limiter name -> Redis time of its last
--          publication, in ms
-- ARGV[1]  the TTL, in ms; then the names
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local now = string.format('%d', now_ms)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
end
local oldest = string.format('%d', now_ms - tonumber(ARGV[1]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. oldest)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
