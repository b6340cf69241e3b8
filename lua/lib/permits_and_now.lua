-- ARGV[2] (permits) and ARGV[3] (now in microseconds, for tests only, or '' to use the server's
-- TIME; see now.lua), as lua/shapes/general.lua and lua/reserve.lua take them (statements).
--
-- Leaves permits and now.
local permits = integer_arg(ARGV[2], 'permits', 1, MAX_EXACT)
local now_arg = ARGV[3]
--!include now.lua
