-- Sliding window log: a sorted set with one member per admitted permit, scored by its time.
-- Exact for every trailing window (t - window, t]. Members are "<time>:<k>" with k counting the
-- members already at that microsecond, so two permits at the same microsecond are two members
-- (whatever the window, also after a policy change shrank it). Time is
-- max(TIME, newest member). Reads only while deciding; trims and adds when admitted. Work and
-- memory are bounded by limit <= 10,000. Model: src/algorithms/sliding_window_log.cpp.
--
-- lua/decide_sliding_window_log.lua is this algorithm inlined into a script of its own
-- (try_acquire on a single sliding_window_log limit): a change here goes there too. The
-- differential test runs both.

local function sliding_window_log(key, now, n, limit, window)
  local t = now
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] then
    local last = tonumber(newest[2])
    if last > t then t = last end
  end
  local outside = string.format('%d', t - window)  -- permits at or before this have left
  local count = redis.call('ZCOUNT', key, '(' .. outside, '+inf')
  local lag = t - now  -- after a clock step back, times count from now, not from t
  if count + n <= limit then
    local commit = function()
      redis.call('ZREMRANGEBYSCORE', key, '-inf', outside)
      local stamp = string.format('%d', t)
      local at_t = redis.call('ZCOUNT', key, stamp, stamp)
      local members, size = {}, 0
      for i = 1, n do
        members[size + 1] = t
        members[size + 2] = stamp .. ':' .. string.format('%d', at_t + i - 1)
        size = size + 2
        if size == 2000 or i == n then  -- bounded ZADD calls (Lua's unpack limit)
          redis.call('ZADD', key, unpack(members, 1, size))
          members, size = {}, 0
        end
      end
      redis.call('PEXPIRE', key, ceil_div(window + lag, 1000) + TTL_EXTRA_MS)
    end
    return true, limit, limit - count - n, 0, window + lag, t, commit
  end
  -- The request fits once the (count + n - limit)-th oldest permit in the window has left.
  local must_leave = count + n - limit
  local oldest = redis.call('ZRANGEBYSCORE', key, '(' .. outside, '+inf', 'WITHSCORES', 'LIMIT',
                            must_leave - 1, 1)
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return false, limit, remaining, tonumber(oldest[2]) + window - now,
         tonumber(newest[2]) + window - now, t
end

ALGORITHMS['sliding_window_log'] = sliding_window_log
