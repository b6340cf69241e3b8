#!lua flags=allow-cross-slot-keys
-- batch_across_slots: lua/batch.lua for the calls of one batch on keys of several slots that
-- one Redis Cluster node serves (Redis >= 7: the flag lets a script touch keys of slots other
-- than those of its declared keys, on the node that serves them). KEYS holds the keys of the
-- first calls, all of one slot, by which the batch is routed; the other calls' keys are sent as
-- arguments (a cluster refuses declared keys of several slots with CROSSSLOT, flag or not).
-- A server older than 7 refuses the whole script ("Error compiling script"): the flag is not
-- Lua.
--!include batch.lua
