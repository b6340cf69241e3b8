-- fleet_counts: adds one client's decision counts for a limiter name to the fleet's
-- (StatsPublisher, src/redis/stats_publisher.cpp; `redlimit watch` reads them), and keeps the
-- hash for a while after its last write. Why a script: the hash never exists without its TTL,
-- as no redlimit key does (docs/operations.md).
--
-- KEYS[1]  `<prefix>:stats:{<name>}`, a hash: allowed, denied, shadow_denied, failure_policy
-- ARGV[1]  the TTL, in ms; then pairs of a field and the count to add to it
for i = 2, #ARGV - 1, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
