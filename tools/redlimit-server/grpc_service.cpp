#include "grpc_service.hpp"

#include <google/protobuf/arena.h>

#include <cstddef>

#include "proto_translation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit_server {
namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

/// The calls each queue has requested at any time: a Redis batch's (ClientOptions::max_batch
/// by default), so that the calls of one turn of the loop do not wait for requests.
constexpr int requested_calls = 64;

/// The bytes of a call's own arena block: a request of a few descriptors and its answer fit.
constexpr std::size_t message_block_bytes = 2048;

/// An arena whose first block is `block` (message_block_bytes), grown by the heap when a call's
/// messages outgrow it.
google::protobuf::ArenaOptions arena_options(char* block) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = message_block_bytes;
  return options;
}

/// Where a worker's calls come from.
struct CallSource {
  RateLimitService::AsyncService& service;
  grpc::ServerCompletionQueue& queue;
  Worker& worker;
};

/// One ShouldRateLimit call, from its request to its answer, on its worker's thread. It deletes
/// itself when its last event has come out of the queue.
class GrpcCall final : public QueueTag {
 public:
  /// Requests the next call from `source`.
  static void request(const CallSource& source) {
    auto* call = new GrpcCall(source);
    source.service.RequestShouldRateLimit(&call->context_, call->request_, &call->responder_,
                                          &source.queue, &source.queue, call);
  }

  void on_event(bool ok) override {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    switch (source_.worker.queue_state()) {
      case QueueState::shut:
        delete this;  // gRPC cancels it
        return;
      case QueueState::stopping:
        finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "redlimit-server is shutting down"));
        return;
      case QueueState::serving:
        break;
    }
    request(source_);
    RateLimitCall call;
    try {
      call = call_from(*request_);
    } catch (...) {
      finish(status_of(std::current_exception()));
      return;
    }
    source_.worker.decide(std::move(call),
                          [this](std::exception_ptr error, RateLimitAnswer answer) {
                            if (error) {
                              finish(status_of(error));
                              return;
                            }
                            fill(*response_, answer);
                            finish(grpc::Status::OK);
                          });
  }

 private:
  explicit GrpcCall(const CallSource& source) : source_(source) {}
  ~GrpcCall() = default;

  void finish(const grpc::Status& status) {
    finishing_ = true;
    if (status.ok()) {
      responder_.Finish(*response_, status, this);
    } else {
      responder_.FinishWithError(status, this);
    }
  }

  CallSource source_;
  grpc::ServerContext context_;
  /// Why an arena with a block of its own: the messages' parts (descriptors, entries, statuses,
  /// headers and their strings) come out of this call's one allocation, not one each.
  alignas(std::max_align_t) char first_block_[message_block_bytes];
  google::protobuf::Arena arena_{arena_options(first_block_)};
  RateLimitRequest* request_ = google::protobuf::Arena::CreateMessage<RateLimitRequest>(&arena_);
  RateLimitResponse* response_ = google::protobuf::Arena::CreateMessage<RateLimitResponse>(&arena_);
  grpc::ServerAsyncResponseWriter<RateLimitResponse> responder_{&context_};
  bool finishing_ = false;
};

}  // namespace

RateLimitGrpcService::RateLimitGrpcService(grpc::ServerBuilder& builder, std::size_t workers) {
  builder.RegisterService(&service_);
  for (std::size_t i = 0; i < workers; ++i)
    queues_.push_back(builder.AddCompletionQueue());
}

void RateLimitGrpcService::serve(const std::vector<std::unique_ptr<Worker>>& workers) {
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Worker& worker = *workers[i];
    grpc::ServerCompletionQueue& queue = *queues_[i];
    worker.serve(&queue, [source = CallSource{service_, queue, worker}] {
      for (int i = 0; i < requested_calls; ++i)
        GrpcCall::request(source);
    });
  }
}

grpc::Status status_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidCall& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
  } catch (const redlimit::InvalidArgument& e) {
    // Why the caller's: the limits were checked when the configuration was read, so what the
    // library refuses before any I/O is what the call sent (a descriptor too long for a key).
    return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
  } catch (const redlimit::Unavailable& e) {
    return {grpc::StatusCode::UNAVAILABLE, e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  } catch (...) {
    return {grpc::StatusCode::INTERNAL, "unknown error"};
  }
}

}  // namespace redlimit_server
