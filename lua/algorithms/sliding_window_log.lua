-- Sliding window log: a sorted set with one member per admitted permit, scored by its time.
-- Exact for every trailing window (t - window, t]. Members are "<time>:<k>" with k counting the
-- members already at that microsecond, so two permits at the same microsecond are two members
-- (whatever the window, also after a policy change shrank it). One more member,
-- "stamp:<limit>:<window>:<pv>" with score 0, names the parameters and policy version the log
-- was written under, or for pv 0 the reset tag (a log of the previous release has none);
-- trimming spares score 0. A log the stamp rule restamps (lib/stamp_rule.lua: other parameters,
-- another version of a store, or a reset due) or without a stamp is carried over with the carry
-- the rule leaves: its times apply to the new window and limit as they are (reset: those at or
-- before `since` are dropped, once per reset, as the tag says), and it is written back under the
-- new stamp also when denied. Reads only while deciding; trims and adds when written (its only
-- table: ZADD's arguments). Work and memory are bounded by limit <= 10,000.
-- When the Redis clock steps back: no member is ever written later than the now it was decided
-- at, so members after now are a clock step. They are taken as admitted now (they stay counted)
-- and written back at now, also when denied, so the key is locked for at most one window, not
-- the whole step.
-- Model: src/algorithms/sliding_window_log.cpp.
--!params limit, window, unused
--!checks limit >= 1, window >= 1, 0

--!part add_at
-- Adds `adding` members at the time at_s, named at_s:c .. at_s:(c+adding-1) after the c there.
local at_t = redis.call('ZCOUNT', key, at_s, at_s)
local members, size = {}, 0
for i = 1, adding do
  members[size + 1] = at_s
  members[size + 2] = at_s .. ':' .. string.format('%d', at_t + i - 1)
  size = size + 2
  if size == 2000 or i == adding then  -- bounded ZADD calls (Lua's unpack limit)
    redis.call('ZADD', key, unpack(members, 1, size))
    members, size = {}, 0
  end
end

--!part drop_last
-- Removes r members at the time at_s (at most the c there). Why the last names: the c members
-- at a time are named at_s:0 .. at_s:(c-1), and the next one added there is named by their
-- count, so the names left must stay 0 .. c-r-1.
local c = redis.call('ZCOUNT', key, at_s, at_s)
if r > c then r = c end
local names, size = {}, 0
for k = c - r, c - 1 do
  size = size + 1
  names[size] = at_s .. ':' .. string.format('%d', k)
  if size == 1000 or k == c - 1 then  -- bounded ZREM calls (Lua's unpack limit)
    redis.call('ZREM', key, unpack(names, 1, size))
    names, size = {}, 0
  end
end

--!section decide
local params = string.format('stamp:%d:%d:', limit, window)  -- the stamp less its pv
local old_stamp, spv, other = nil, nil, false  -- the stored stamp, its version, other parameters
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest_at, ahead = 0, false  -- ahead: members after now, a clock step
if newest[2] then
  newest_at = tonumber(newest[2])
  if newest_at > now then
    newest_at, ahead = now, true
    rewrite = true
  end
  old_stamp = redis.call('ZRANGE', key, 0, 0)[1]
  if string.sub(old_stamp, 1, #params) == params then
    spv = tonumber(string.sub(old_stamp, #params + 1))
  elseif string.sub(old_stamp, 1, 6) == 'stamp:' then
    spv, other = tonumber(string.match(old_stamp, '(%d+)$')), true
  else
    old_stamp = nil  -- the previous release's log: read as it is, then stamped
  end
end
--!include ../lib/stamp_rule.lua
local converting = restamp or (newest[2] ~= nil and spv == nil)
local stamp = params .. string.format('%d', stamp_pv)
local stamped = old_stamp == stamp  -- the log holds the stamp written
local bound = now - window  -- permits at or before this have left
if converting and carry == 2 and since > bound then bound = since end
if bound < 0 then bound = 0 end  -- score 0 is the stamp's
local outside = string.format('%d', bound)
local count = redis.call('ZCOUNT', key, '(' .. outside, '+inf')
if converting then rewrite = true end
allowed = count + n <= limit
capacity = limit
if allowed then
  remaining = limit - count - n
  reset = window
else
  -- The request fits once the (count + n - limit)-th oldest permit in the window has left.
  local must_leave = count + n - limit
  local oldest = redis.call('ZRANGEBYSCORE', key, '(' .. outside, '+inf', 'WITHSCORES', 'LIMIT',
                            must_leave - 1, 1)
  remaining = limit - count
  if remaining < 0 then remaining = 0 end
  local left_at = tonumber(oldest[2])
  if left_at > now then left_at = now end
  retry = left_at + window - now
  reset = newest_at + window - now
end

--!section idle
reset = 0
if count > 0 then reset = newest_at + window - now end

--!section write
redis.call('ZREMRANGEBYSCORE', key, '(0', outside)
if not stamped then
  if old_stamp then redis.call('ZREM', key, old_stamp) end
  redis.call('ZADD', key, 0, stamp)
end
local at_s = string.format('%d', now)
local adding = taken
if ahead then adding = adding + redis.call('ZREMRANGEBYSCORE', key, '(' .. at_s, '+inf') end
--!use add_at
local ms = CEIL_DIV(reset, 1000)  -- the TTL in whole milliseconds, rounded up
redis.call('PEXPIRE', key, string.format('%d', ms + TTL_EXTRA_MS))

--!section adjust
-- refund: the n oldest permits in the window leave it (which must hold n: a past window's
-- permits cannot be given back); when the refunded ones were newer, this frees permits later
-- than exact, never earlier; give_back: the permits admitted at taken_at, the take's own (none
-- once they left the window); penalize: n permits admitted now; block (until at most a window
-- ahead: the caller checks): `limit` permits admitted at until - window, which leave at until.
--!use decide
if op == 'refund' and count < n then
  refused = string.format('the window holds %d permits, fewer than the %d refunded ' ..
                          '(permits of a past window cannot be given back)', count, n)
else
  reset = window
  apply = function()
    local taken = 0
    if op == 'penalize' then taken = n end
    --!use write
    if op == 'give_back' and taken_at <= now and not rewrite then
      -- The take's own permits: those admitted at taken_at.
      local at_s, r = string.format('%d', taken_at), n
      --!use drop_last
    elseif op == 'refund' then
      -- The n oldest (rank 0 is the stamp, score 0), by name (drop_last).
      local oldest = redis.call('ZRANGE', key, 1, n, 'WITHSCORES')
      local i = 2
      while i <= #oldest do
        local score = oldest[i]
        local r = 0
        while i <= #oldest and oldest[i] == score do r, i = r + 1, i + 2 end
        local at_s = string.format('%d', tonumber(score))
        --!use drop_last
      end
    elseif op == 'block' then
      local at_s, adding = string.format('%d', until_us - window), limit
      --!use add_at
    end
  end
end
