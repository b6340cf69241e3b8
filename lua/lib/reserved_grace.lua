-- A key acquire() reserved on (version > 0) lives a second longer than its state matters
-- (statements: adds to ms, the TTL in whole milliseconds). Why: a waiter that a busy process
-- wakes after its key's state stopped mattering still finds its reservation where it made it,
-- and uses its slot; without the key it would reserve again at the back of the queue. The
-- model: reserved_grace_ms (src/algorithms/reservation_book.hpp).
if version > 0 then ms = ms + 1000 end
