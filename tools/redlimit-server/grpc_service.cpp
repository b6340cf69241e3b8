#include "grpc_service.hpp"

#include "proto_translation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit_server {

RateLimitGrpcService::RateLimitGrpcService(std::vector<std::unique_ptr<Worker>>& workers)
    : workers_(workers) {
  SetMessageAllocatorFor_ShouldRateLimit(&arenas_);
}

grpc::ServerUnaryReactor* RateLimitGrpcService::ShouldRateLimit(
    grpc::CallbackServerContext* context,
    const envoy::service::ratelimit::v3::RateLimitRequest* request,
    envoy::service::ratelimit::v3::RateLimitResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RateLimitCall call;
  try {
    call = call_from(*request);
  } catch (...) {
    reactor->Finish(status_of(std::current_exception()));
    return reactor;
  }
  Worker& worker = pick_worker();
  // Why the response is filled on the worker's thread: gRPC owns it until Finish(), which any
  // thread may call.
  worker.submit(std::move(call),
                [reactor, response](std::exception_ptr error, RateLimitAnswer answer) {
                  if (error) {
                    reactor->Finish(status_of(error));
                    return;
                  }
                  fill(*response, answer);
                  reactor->Finish(grpc::Status::OK);
                });
  return reactor;
}

Worker& RateLimitGrpcService::pick_worker() {
  const std::size_t first = next_.fetch_add(1, std::memory_order_relaxed);
  // Why an awake one first: the call then goes with the others of its wake-up, and a sleeping
  // worker is woken only when none is awake (many calls at once wake them all, in turn).
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker& worker = *workers_[(first + i) % workers_.size()];
    if (worker.awake()) return worker;
  }
  return *workers_[first % workers_.size()];
}

grpc::Status status_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidCall& e) {
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
