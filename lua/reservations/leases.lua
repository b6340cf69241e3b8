-- Owner leases: the reservations of a process that died are given back. A reservation that
-- waits longer than the lease L is registered in `<key>:leases` (K[3]), a sorted set of
-- reserved versions scored by lease expiry (server time, us), and `<key>:held` (K[4]), a
-- hash version -> "permits:slot:slot_f:epoch:cancels_before:p:d" (what a cancel needs). Its
-- owner renews the lease every L/3 while the slot is later than the expiry it was last told.
-- Every reserve, cancel and renew call on the key first takes the expired leases (at most
-- RECLAIM_MAX per call, oldest first) and cancels each as its owner would (the cancel section:
-- verdict, state moved back, log, notice); a reservation found due (its slot is at or before
-- the expiry, so its owner may have used it) or of another epoch is just removed.
--
-- Why a live owner never uses permits given back: it uses a registered reservation without
-- asking only if its slot is at or before the last expiry Redis confirmed, and any reclaim,
-- after that expiry, finds such a slot due. Otherwise it claims it first (claim_lease): still
-- held, the registration ends and it is the owner's; reclaimed, the owner reserves again.
-- Both times are Redis times: no client clock enters the rule. Model:
-- src/algorithms/reservations.cpp (reclaim_expired).

-- How many expired leases one call reclaims at most.
local RECLAIM_MAX = 256

-- K is the key's four keys (lua/reserve.lua): the key, its log, its leases and its held.

-- Publishes a returned cancellation on K[1] .. ':cancelled', for the waiters behind it.
local function publish_cancel(cancels, epoch, cancelled, shift, shift_f, shift_p)
  redis.call('PUBLISH', K[1] .. ':cancelled',
             string.format('%d:%d:%d:%d:%d:%d', cancels, epoch, cancelled, shift, shift_f,
                           shift_p))
end

-- Keeps both keys of the leases for at least ttl_ms.
local function keep_leases(ttl_ms)
  for i = 3, 4 do
    if redis.call('PTTL', K[i]) < ttl_ms then redis.call('PEXPIRE', K[i], ttl_ms) end
  end
end

-- Registers the reservation `version` (waiting `wait` us) under a lease until now + lease;
-- returns that expiry. The keys live until its slot has passed by a lease.
local function register_lease(version, now, lease, wait, description)
  local expiry = now + lease
  redis.call('ZADD', K[3], expiry, version)
  redis.call('HSET', K[4], version, description)
  keep_leases(ceil_div(wait + lease, 1000) + 1000)
  return expiry
end

-- The new expiry of the lease of `version`, or 0 if it is not held any more.
local function renew_lease(version, now, lease)
  if not redis.call('ZSCORE', K[3], version) then return 0 end
  redis.call('ZADD', K[3], 'XX', now + lease, version)
  return now + lease
end

-- Ends the registration of `version`: 1 if it was held, 0 if it was not (reclaimed).
local function claim_lease(version)
  if redis.call('ZREM', K[3], version) == 0 then return 0 end
  redis.call('HDEL', K[4], version)
  return 1
end

-- Ends the registration of `version`, if any (its owner cancelled it).
local function end_lease(version)
  if redis.call('ZREM', K[3], version) == 1 then redis.call('HDEL', K[4], version) end
end

-- Cancels, as their owners would, the reservations whose leases expired by now, under the
-- limit in force (cancel is the algorithm's CANCELS function); returns how many gave permits
-- back. Stops, leaving them, on a key of a newer policy version than the request's.
local function reclaim_expired(cancel, now, p, d, burst, pv, since, sent_since, carry)
  local returned = 0
  local expired = redis.call('ZRANGEBYSCORE', K[3], '-inf', string.format('%d', now),
                             'LIMIT', 0, RECLAIM_MAX)
  if #expired == 0 then return 0 end
  -- Newest first: a cancellation moves only the reservations behind it (see reclaim_slots.lua).
  table.sort(expired, function(a, b) return tonumber(a) > tonumber(b) end)
  -- Why HGET per member, not one HMGET: the documented least-privilege ACL grants +hget only.
  local batch, fields = {}, {}
  for i, member in ipairs(expired) do
    local held = redis.call('HGET', K[4], member)
    if held then
      local f = {}
      for field in string.gmatch(held, '[^:]+') do f[#f + 1] = tonumber(field) end
      fields[i] = f
      batch[#batch + 1] = {version = tonumber(member), before = f[5], p = f[6]}
    end
  end
  begin_reclaim(batch)
  for i, member in ipairs(expired) do
    local version = tonumber(member)
    local f = fields[i]
    if f then
      local verdict, shift, shift_f, shift_p, cancels, key_epoch =
          cancel(K[1], K[2], now, f[1], p, d, burst, f[2], f[3], version, f[4], f[5], pv,
                 since, sent_since, carry, f[6], f[7])
      if verdict == 'stale' then
        end_reclaim()
        return returned
      end
      if verdict == 'returned' then
        returned = returned + 1
        publish_cancel(cancels, key_epoch, version, shift, shift_f, shift_p)
      end
    end
    redis.call('ZREM', K[3], member)
    redis.call('HDEL', K[4], member)
  end
  end_reclaim()
  return returned
end
