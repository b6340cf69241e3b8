-- Every value a script handles stays at or below 2^52, where doubles hold integers exactly; the
-- C++ side validates arguments so that it does. Integer division is floor(a / b) corrected by
-- one either way (IDIV and CEIL_DIV, expanded inline by lua/embed.py): the double quotient can
-- round up to the next integer when it is very close to it.
local floor = math.floor
local MAX_EXACT = 4503599627370496  -- 2^52
