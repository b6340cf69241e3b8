#pragma once

#include <hiredis/async.h>

#include <string>

#include "redlimit/reply.hpp"

namespace redlimit::detail {

/// Reader functions under which hiredis's reader builds each reply directly as a Reply: a whole
/// reply lives in one block of the per-thread frame pool, each element in place inside its
/// array's `elements`, and a string's text is copied once, from the read buffer into the Reply.
/// Nothing else is allocated; a NULL result (out of memory) makes the reader fail with
/// REDIS_ERR_OOM and free the reply built so far with the same functions.
redisReplyObjectFunctions* reply_builder() noexcept;

/// Makes `context`'s reader build its replies with reply_builder(), so its reply callbacks get
/// objects for built_reply(). Call it right after the context is created, before any I/O: one
/// reader must make and free every object with the same functions. Only for command
/// connections: on a subscribed context hiredis reads the fields of the pub/sub replies itself.
void build_replies_as_reply(redisAsyncContext* context) noexcept;

/// The Reply inside a whole reply made by reply_builder(), as hiredis hands it to a callback
/// (or redisReaderGetReply returns it). hiredis frees the object after the callback; the Reply
/// may be moved out before that.
Reply& built_reply(void* reply) noexcept;

/// Keeps the buffer of a reply's text, read and no longer needed, for the next text the reader
/// copies on this thread (see reply_builder()). A decision's reply then costs no allocation.
void reuse_reply_text(std::string&& text) noexcept;

}  // namespace redlimit::detail
