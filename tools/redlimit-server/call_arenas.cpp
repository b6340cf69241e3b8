#include "call_arenas.hpp"

#include <google/protobuf/arena.h>

namespace redlimit_server {
namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;

/// What a usual call takes: its request, its answer and the answer's headers fit.
constexpr std::size_t block_size = 2048;

}  // namespace

class CallArenas::Holder final : public grpc::MessageHolder<RateLimitRequest, RateLimitResponse> {
 public:
  explicit Holder(CallArenas& pool) : pool_(pool), arena_(options(block_)) { make_messages(); }

  /// gRPC is done with the call: its messages go, and the arena goes back to the pool.
  void Release() override {
    arena_.Reset();
    make_messages();
    pool_.give_back(this);
  }

 private:
  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = block_size;
    // Why: the thread that answers (a worker) allocates on a block of its own; one that holds
    // a whole answer is one allocation per call.
    options.start_block_size = block_size;
    return options;
  }
  void make_messages() {
    set_request(google::protobuf::Arena::CreateMessage<RateLimitRequest>(&arena_));
    set_response(google::protobuf::Arena::CreateMessage<RateLimitResponse>(&arena_));
  }

  CallArenas& pool_;
  // Why before arena_: the arena is made with it.
  alignas(std::max_align_t) char block_[block_size];
  google::protobuf::Arena arena_;
};

CallArenas::CallArenas() = default;

CallArenas::~CallArenas() {
  for (Holder* holder : free_)
    delete holder;
}

grpc::MessageHolder<RateLimitRequest, RateLimitResponse>* CallArenas::AllocateMessages() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      Holder* holder = free_.back();
      free_.pop_back();
      return holder;
    }
    ++made_;
  }
  return new Holder(*this);
}

std::size_t CallArenas::made() const {
  std::lock_guard lock(mutex_);
  return made_;
}

void CallArenas::give_back(Holder* holder) {
  std::lock_guard lock(mutex_);
  free_.push_back(holder);
}

}  // namespace redlimit_server
