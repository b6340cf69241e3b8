-- A stored count `count`, admitted under a limit of `old_limit`, as it counts under `limit` when
-- the state is carried over to changed parameters: kept (carry 0, as_is), scaled by
-- limit / old_limit rounding up (1, proportional), or zeroed (2, reset). Included as statements
-- into the window algorithms' fragments. C++ twin: carried_count in
-- src/algorithms/window_carry.hpp.
-- Why statements and not lib/muldiv.lua: a lean script defines every function it needs on
-- every call, and fixed_window's common path needs none.
if carry == 1 then
  -- ceil(count * limit / old_limit), exact as lib/muldiv.lua computes floor(a * b / c): whole
  -- when count * limit stays below 2^52, else by 5-bit digits of limit (old_limit < 2^46).
  local q, r
  if count <= MAX_EXACT / limit then
    local x = count * limit
    q = IDIV(x, old_limit)
    r = x - q * old_limit
  else
    local whole = IDIV(count, old_limit)
    local rest_of_count = count - whole * old_limit
    local scale, digits_left = 1, limit
    while scale * 32 <= limit do scale = scale * 32 end
    q, r = 0, 0
    while scale >= 1 do
      local digit = IDIV(digits_left, scale)
      digits_left = digits_left - digit * scale
      r = r * 32 + rest_of_count * digit
      local k = IDIV(r, old_limit)
      q = q * 32 + k
      r = r - k * old_limit
      scale = scale / 32
    end
    q = whole * limit + q
  end
  if r > 0 then q = q + 1 end
  count = q
elseif carry == 2 then
  count = 0
end
