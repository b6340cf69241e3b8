-- Reservation bookkeeping and cancellation. A key that acquire() reserved on keeps
-- {version, cancels, epoch}: `version` counts its reservations (a reservation's version is its
-- place in the queue), `cancels` its returned cancellations, and `epoch` is the server time of
-- its first reservation (a key deleted by reset() or expiry starts a new epoch; two epochs of
-- one key starting in the same microsecond, possible only after the clock stepped back, would
-- be taken for one).
--
-- A cancellation is evaluated under the limit its reservation was made under (the client sends
-- the same limit arguments as for the reservation): the permits it gives back, n*T, are then
-- exactly the step the reservation took.
--
-- Cancelling gives a reservation's permits back only if its slot is still ahead. Its slot is
-- where it was reserved, moved earlier by every later cancellation of a reservation ahead of it
-- (that is what the waiters, told by a notice, do). So that the script knows it exactly, even
-- when a client missed a notice or one is still in flight, the key keeps a log of its recent
-- cancellations: a sorted set `<key>:cancels` scored by cancellation number, each member
-- "number:cancelled_version:shift_us:shift_f:p:backlog_end_us". A cancellation matters only to
-- reservations made before it, whose slots are all at or before the backlog's end at that
-- moment; once that time has passed, they are all due, and the entry goes (oldest first). A
-- reservation that missed a removed entry is therefore due.
--
-- Why moving the waiters behind is safe: a cancellable reservation waited, so every reservation
-- made after it while it was pending found a backlog longer than tau >= n*T ahead of its own
-- arrival; moving it n*T earlier never moves it before the moment it would have had without the
-- cancelled one. Model: src/algorithms/reservations.cpp.

-- How many stale entries one call removes at most (each call adds one at most).
local LOG_PRUNE_MAX = 16

-- Removes the oldest entries whose backlog end has passed.
local function prune_cancel_log(log, now)
  for _ = 1, LOG_PRUNE_MAX do
    local oldest = redis.call('ZRANGE', log, 0, 0)
    if #oldest == 0 then return end
    local _, _, _, _, _, backlog_end = split_value(oldest[1])
    if backlog_end > now then return end
    redis.call('ZREMRANGEBYRANK', log, 0, 0)
  end
end

-- The slot now of the reservation (version, made after `cancels_before` cancellations, reserved
-- at slot) on a key with `cancels` cancellations, in 1/p us; nil when an entry it needs was
-- removed (it is due).
local function current_slot(log, cancels, version, cancels_before, slot, slot_f, p)
  if cancels_before == cancels then return slot, slot_f end
  local entries = redis.call('ZRANGEBYSCORE', log, string.format('(%d', cancels_before), '+inf')
  if #entries < cancels - cancels_before then return nil end
  for _, entry in ipairs(entries) do
    local _, cancelled, shift, shift_f, den = split_value(entry)
    if cancelled < version then
      if den ~= p then shift_f = 0 end  -- under another policy: whole microseconds, rounded down
      slot, slot_f = sub_frac(slot, slot_f, shift, shift_f, p)
    end
  end
  return slot, slot_f
end

-- 'refused' (the key is of another epoch: nothing changes), 'due' (the slot has come: the
-- caller keeps the permits) or 'returned', for the reservation (slot, version, its epoch,
-- cancels_before) of a key whose bookkeeping is (key_version, cancels, key_epoch).
local function cancel_verdict(log, key_version, cancels, key_epoch, now, p, slot, slot_f, version,
                              epoch, cancels_before)
  if key_version == 0 or key_epoch ~= epoch or version > key_version or
      cancels_before > cancels then
    return 'refused'
  end
  prune_cancel_log(log, now)
  local at, at_f = current_slot(log, cancels, version, cancels_before, slot, slot_f, p)
  if at == nil or not after_frac(at, at_f, now, 0) then return 'due' end
  return 'returned'
end

-- Logs a returned cancellation, the key's cancels-th; the log lives as long as its latest
-- backlog end.
local function log_cancel(log, now, cancels, version, shift, shift_f, p, backlog_end)
  redis.call('ZADD', log, cancels,
             string.format('%d:%d:%d:%d:%d:%d', cancels, version, shift, shift_f, p, backlog_end))
  local ttl_ms = ceil_div(backlog_end - now, 1000) + TTL_EXTRA_MS
  if ttl_ms < 1 then ttl_ms = 1 end
  if redis.call('PTTL', log) < ttl_ms then redis.call('PEXPIRE', log, ttl_ms) end
end
