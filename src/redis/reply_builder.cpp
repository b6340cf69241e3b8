#include "redis/reply_builder.hpp"

#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "redlimit/task.hpp"

namespace redlimit::detail {
namespace {

/// A whole reply, as the reader makes it and hands it on.
struct BuiltReply {
  // Why hiredis's own struct first: redisProcessCallbacks reads a reply that no callback waits
  // for (a server's "max number of clients" error before it hangs up) as a redisReply: its
  // `type`, and for an error its `str` as a C string. Only the scalar fields are filled in;
  // `elements` and `element` stay empty.
  redisReply head{};
  Reply reply;
};

constexpr std::size_t block_size = sizeof(BuiltReply);

/// Buffers of reply texts given back by reuse_reply_text(), for the texts read next.
/// Why bounded: it only has to cover the replies read in one go before their readers give them
/// back; larger texts (a CLUSTER SLOTS answer) are not kept.
class TextBuffers {
 public:
  std::string take() noexcept {
    if (buffers_.empty()) return {};
    std::string buffer = std::move(buffers_.back());
    buffers_.pop_back();
    return buffer;
  }
  void give(std::string&& text) noexcept {
    if (text.capacity() > largest_kept || buffers_.size() == most_kept) return;
    try {
      buffers_.push_back(std::move(text));
    } catch (const std::bad_alloc&) {
      // Not kept: the text is freed as it would have been.
    }
  }

 private:
  static constexpr std::size_t largest_kept = 256;
  static constexpr std::size_t most_kept = 1024;
  std::vector<std::string> buffers_;
};

thread_local TextBuffers text_buffers;

/// Whether a text of `length` bytes takes a heap buffer (std::string keeps short ones inside).
bool on_heap(std::size_t length) noexcept {
  return length > std::string().capacity();
}

int hiredis_type(Reply::Type type) noexcept {
  switch (type) {
    case Reply::Type::integer:
      return REDIS_REPLY_INTEGER;
    case Reply::Type::string:
      return REDIS_REPLY_STRING;
    case Reply::Type::status:
      return REDIS_REPLY_STATUS;
    case Reply::Type::array:
      return REDIS_REPLY_ARRAY;
    case Reply::Type::error:
      return REDIS_REPLY_ERROR;
    case Reply::Type::nil:
      break;
  }
  return REDIS_REPLY_NIL;
}

void free_whole_reply(void* object) noexcept {
  auto* whole = static_cast<BuiltReply*>(object);
  whole->~BuiltReply();
  free_frame(whole, block_size);
}

/// The array whose element `task` reads.
Reply& array_of(const redisReadTask& task) noexcept {
  const redisReadTask& parent = *task.parent;
  // The root task is the only one without a parent, and only its object is a BuiltReply.
  if (parent.parent == nullptr) return static_cast<BuiltReply*>(parent.obj)->reply;
  return *static_cast<Reply*>(parent.obj);
}

/// The object for `task`, set by `fill`: its element, already in its array, or a new whole
/// reply. nullptr when that fails: the reader then reports "Out of memory".
template <class Fill>
void* build(const redisReadTask* task, Fill fill) noexcept {
  try {
    if (task->parent != nullptr) {
      Reply& element = array_of(*task).elements[static_cast<std::size_t>(task->idx)];
      fill(element);
      return &element;
    }
    auto* whole = new (allocate_frame(block_size)) BuiltReply;
    try {
      fill(whole->reply);
    } catch (...) {
      free_whole_reply(whole);
      throw;
    }
    const Reply& reply = whole->reply;
    whole->head.type = hiredis_type(reply.type);
    whole->head.integer = reply.integer;
    whole->head.len = reply.str.size();
    // Why it stays valid: the block never moves, and the text is only moved out after hiredis
    // is done reading the head (in the reply's callback, or never).
    whole->head.str = whole->reply.str.data();
    return whole;
  } catch (...) {
    return nullptr;
  }
}

void* create_string(const redisReadTask* task, char* text, std::size_t length) noexcept {
  return build(task, [&](Reply& reply) {
    switch (task->type) {
      case REDIS_REPLY_STATUS:
        reply.type = Reply::Type::status;
        break;
      case REDIS_REPLY_ERROR:
        reply.type = Reply::Type::error;
        break;
      default:
        reply.type = Reply::Type::string;
        break;
    }
    if (on_heap(length)) reply.str = text_buffers.take();
    reply.str.assign(text, length);
  });
}

void* create_array(const redisReadTask* task, int elements) noexcept {
  return build(task, [&](Reply& reply) {
    reply.type = Reply::Type::array;
    // Why all at once: the reader then builds each element in place through a pointer to it,
    // which growing the vector later would leave dangling.
    reply.elements.resize(static_cast<std::size_t>(elements));
  });
}

void* create_integer(const redisReadTask* task, long long value) noexcept {
  return build(task, [&](Reply& reply) {
    reply.type = Reply::Type::integer;
    reply.integer = value;
  });
}

void* create_nil(const redisReadTask* task) noexcept {
  return build(task, [](Reply& reply) { reply.type = Reply::Type::nil; });
}

/// The reader frees only whole replies: the ones it returned, and the one it was building when
/// it failed or was freed. Elements go with their array.
redisReplyObjectFunctions functions = {&create_string, &create_array, &create_integer, &create_nil,
                                       &free_whole_reply};

}  // namespace

redisReplyObjectFunctions* reply_builder() noexcept {
  return &functions;
}

void build_replies_as_reply(redisAsyncContext* context) noexcept {
  context->c.reader->fn = &functions;
}

Reply& built_reply(void* reply) noexcept {
  return static_cast<BuiltReply*>(reply)->reply;
}

void reuse_reply_text(std::string&& text) noexcept {
  if (on_heap(text.capacity())) text_buffers.give(std::move(text));
}

}  // namespace redlimit::detail
