-- What the permits `available` of a state stamped with other parameters (capacity `old_cap`)
-- become under the policy in force (capacity `new_cap`), as `carry` says (statements, inside a
-- block of the includer). Needs MAX_EXACT and floor; old_cap, new_cap <= 10^12 < 2^46.
-- C++ twin: carry_permits in src/algorithms/exact.hpp.
--   0 as_is: min(available, new_cap), so that tightening never frees a permit;
--   1 proportional: floor(available * new_cap / old_cap) (a debt stays a debt);
--   2 reset: new_cap.
--
-- Leaves carried.
local carried = available
if carry == 2 then
  carried = new_cap
elseif carry == 1 then
  local a = available
  if a < 0 then a = -a end
  local q, r = 0, 0
  if a * new_cap <= MAX_EXACT then
    local x = a * new_cap
    q = IDIV(x, old_cap)
    r = x - q * old_cap
  else
    -- In 5-bit digits of new_cap, as lib/muldiv.lua: every partial value stays below 2^52.
    local qa = IDIV(a, old_cap)
    local ra = a - qa * old_cap
    local digits, count, rest = {}, 0, new_cap
    while rest > 0 do
      local high = IDIV(rest, 32)
      count = count + 1
      digits[count] = rest - high * 32
      rest = high
    end
    for i = count, 1, -1 do
      r = r * 32 + ra * digits[i]
      local k = IDIV(r, old_cap)
      q = q * 32 + k
      r = r - k * old_cap
    end
    q = qa * new_cap + q
  end
  if available < 0 then
    carried = -q
    if r > 0 then carried = carried - 1 end
  else
    carried = q
  end
end
if carried > new_cap then carried = new_cap end
