-- reset: forgets a key's state under every limit of its policy, with its reservations' side keys
-- (Limiter::reset), and marks the time of the reset: the reset gave back everything the key
-- held, so a give-back of a take made before it, arriving later, gives nothing
-- (lua/shapes/adjust.lua). A script rather than a DEL so that it goes in the batch of the calls
-- queued beside it, and applies in the order queued.
--
-- KEYS[1]   the reset mark, `<key base>:reset`: the time of the latest reset, kept as long as any
--           key below (or the mark before) would have lived, the longest a take's give-back can
--           still hold anything; not written when none of them exists
-- KEYS[2..] the keys to delete (one hash tag)
-- ARGV[1]   now in microseconds, for tests only, or '' to use the server's TIME
--
-- Returns the number of keys deleted.
local TTL_EXTRA_MS = 0
--!include lib/numbers.lua
--!include lib/integer_arg.lua
local now_arg = ARGV[1]
--!include lib/now.lua
local keep_ms = redis.call('PTTL', KEYS[1])
for i = 2, #KEYS do
  local ms = redis.call('PTTL', KEYS[i])
  if ms > keep_ms then keep_ms = ms end
end
local deleted = redis.call('DEL', unpack(KEYS, 2))
if keep_ms > 0 then
  redis.call('SET', KEYS[1], string.format('%d', now), 'PX', string.format('%d', keep_ms))
end
return deleted
