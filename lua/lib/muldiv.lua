-- floor(a * b / c) and the remainder, for integers 0 <= a, b <= 2^52 and 0 < c <= 2^46 whose
-- quotient is below 2^52. When a * b would pass 2^52, it works in 5-bit digits of b so that
-- every partial value stays below 2^52. C++ twin: mul_div in src/algorithms/exact.hpp.
-- Why a function: it is needed up to three times per decision, and its digit loop (taken only
-- when a * b would pass 2^52) is too long to repeat; one closure per call costs little.
local function muldiv(a, b, c)
  if b == 0 or a <= MAX_EXACT / b then
    local x = a * b
    local q = IDIV(x, c)
    return q, x - q * c
  end
  local qa = IDIV(a, c)
  local ra = a - qa * c
  local digits, count, rest = {}, 0, b
  while rest > 0 do
    local high = IDIV(rest, 32)
    count = count + 1
    digits[count] = rest - high * 32
    rest = high
  end
  local q, r = 0, 0
  for i = count, 1, -1 do
    r = r * 32 + ra * digits[i]
    local k = IDIV(r, c)
    q = q * 32 + k
    r = r - k * c
  end
  return qa * b + q, r
end
