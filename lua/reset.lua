-- reset: forgets a key's state under every limit of its policy, with its reservations' side keys
-- (Limiter::reset). A script rather than a DEL so that it goes in the batch of the calls queued
-- beside it, and applies in the order queued.
--
-- KEYS      the keys to delete (one hash tag)
--
-- Returns the number of keys deleted.
return redis.call('DEL', unpack(KEYS))
