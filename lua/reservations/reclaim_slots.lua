-- The slots of a batch of reservations reclaimed by one call (reservations/leases.lua), from
-- one read of the cancellation log (reservations/cancel.lua, current_slot tells the rule).
-- Each reclaim logs a cancellation, so the log a reservation is moved by holds every earlier
-- reclaim's entries: reading and parsing it again per reservation cost reservations x entries
-- per call (~400 ms for 256 reservations behind 1,000 entries). Here the log is read and parsed
-- once, and each reservation's shift, the sum of the shifts of the entries numbered after its
-- cancels_before and cancelling a version before its own, is answered by a sweep over the
-- versions with a Fenwick tree over the entry numbers: O((E + R) log E) per call. Subtracting
-- the sum equals subtracting the shifts one by one (no step clamps), exactly: the sums stay
-- within 2^53. Needs exact.lua and frac_time.lua.

-- (a, af) + (b, bf), fractions in [0, p).
local function add_frac(a, af, b, bf, p)
  local us, f = a + b, af + bf
  if f >= p then return us + 1, f - p end
  return us, f
end

-- How many of the ascending `numbers` are at most `n`.
local function count_at_most(numbers, n)
  local low, high = 0, #numbers
  while low < high do
    local mid = IDIV(low + high + 1, 2)
    if numbers[mid] <= n then low = mid else high = mid - 1 end
  end
  return low
end

-- For each reservation {version, before, p} of `batch`, its shift in 1/p us as {us, f}, keyed
-- by version, over the `entries` (parsed, in ascending number).
local function batch_shifts(entries, numbers, batch)
  local shifts = {}
  local by_cancelled = {}
  for i = 1, #entries do by_cancelled[i] = i end
  table.sort(by_cancelled, function(a, b) return entries[a].cancelled < entries[b].cancelled end)
  local queries = {}
  for i = 1, #batch do queries[i] = batch[i] end
  table.sort(queries, function(a, b) return a.version < b.version end)
  local size = #entries
  local trees = {}  -- per denominator: {us = {}, f = {}, added = how many of by_cancelled}
  for _, query in ipairs(queries) do
    local p = query.p
    local tree = trees[p]
    if not tree then
      tree = {us = {}, f = {}, added = 0}
      for i = 1, size do tree.us[i], tree.f[i] = 0, 0 end
      trees[p] = tree
    end
    -- Add the entries cancelling a version before this one; position size - i + 1 for the
    -- i-th by number, so that "numbered after before" is a prefix.
    while tree.added < size and entries[by_cancelled[tree.added + 1]].cancelled < query.version do
      tree.added = tree.added + 1
      local index = by_cancelled[tree.added]
      local entry = entries[index]
      local shift_f = entry.shift_f
      if entry.den ~= p then shift_f = 0 end  -- under another policy: whole microseconds
      local position = size - index + 1
      while position <= size do
        tree.us[position], tree.f[position] =
            add_frac(tree.us[position], tree.f[position], entry.shift, shift_f, p)
        position = position + bit.band(position, -position)
      end
    end
    local us, f = 0, 0
    local position = size - count_at_most(numbers, query.before)
    while position > 0 do
      us, f = add_frac(us, f, tree.us[position], tree.f[position], p)
      position = position - bit.band(position, -position)
    end
    shifts[query.version] = {us, f}
  end
  return shifts
end

-- While a call reclaims a batch: {batch, and from its first slot asked: ceiling (the key's
-- cancels then: the entries the call logs since shift none of the older reservations it
-- cancels next, newest first), numbers (the entries', ascending), cancelled_at (version -> the
-- number of the entry that cancelled it) and shifts (batch_shifts)}. nil otherwise.
local reclaiming = nil

-- Starts a batch: `batch` lists the reservations to reclaim as {version, before (their
-- cancels_before), p (the denominator of their slots)}.
local function begin_reclaim(batch)
  reclaiming = {batch = batch}
end

local function end_reclaim()
  reclaiming = nil
end

-- Reads and parses the entries the batch needs, numbered after its lowest cancels_before up to
-- the ceiling, once.
local function read_batch_log(log, ceiling)
  local lowest = ceiling
  for _, reservation in ipairs(reclaiming.batch) do
    if reservation.before < lowest then lowest = reservation.before end
  end
  local entries, numbers, cancelled_at = {}, {}, {}
  local raw = redis.call('ZRANGEBYSCORE', log, string.format('(%d', lowest),
                         string.format('%d', ceiling))
  for i, value in ipairs(raw) do
    local number, cancelled, shift, shift_f, den = split_value(value)
    entries[i] = {cancelled = cancelled, shift = shift, shift_f = shift_f, den = den}
    numbers[i] = number
    cancelled_at[cancelled] = number
  end
  reclaiming.ceiling, reclaiming.numbers, reclaiming.cancelled_at = ceiling, numbers, cancelled_at
  reclaiming.shifts = batch_shifts(entries, numbers, reclaiming.batch)
end

-- current_slot (reservations/cancel.lua) for a reservation of the batch, the same answer:
-- `oldest` is the number of the oldest entry the log holds now (nil: none), the entries before
-- it were pruned since the batch's read.
local function reclaimed_slot(log, cancels, version, cancels_before, slot, slot_f, p, oldest)
  if not reclaiming.ceiling then read_batch_log(log, cancels) end
  local ceiling = reclaiming.ceiling
  if cancels_before >= ceiling then return slot, slot_f end
  local first = math.max(cancels_before + 1, oldest or math.huge)
  local own = reclaiming.cancelled_at[version]
  if own and own >= first then return nil, true end
  local numbers = reclaiming.numbers
  if #numbers - count_at_most(numbers, first - 1) < ceiling - cancels_before then return nil end
  local shift = reclaiming.shifts[version]
  return sub_frac(slot, slot_f, shift[1], shift[2], p)
end
