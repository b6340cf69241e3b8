-- decide_@ALG@ inside a batch (lua/batch.lua): the lean shape's decision (shapes/lean.lua) for
-- one request, as a function that the batch defines once and calls for each decide_@ALG@ call it
-- carries. The batch has checked the arguments, read the time and resolved since (and passes it
-- as sent too: sent_since); it catches what the function raises, so that an error fails its own
-- call only. Its Redis commands go through CALL (lua/embed.py writes CALL for redis.call): the
-- batch passes BATCH_CALL for a key that other calls of the batch name too, redis.call for the
-- others; and MEMO for the first, nil for the others.
--
-- Why a function per batch, not the lean script wrapped as a function per call: the wrapped
-- script would check the policy's arguments on every call and build two tables per call; this
-- one is called with numbers, and calls Redis through CALL.
do
  --!needs
  RUNS[@INDEX@] = function(CALL, MEMO, key, n, now, TTL_EXTRA_MS, pv, since, sent_since, carry,
                           field1, field2, field3)
    --!include lean_decision.lua
  end
end
