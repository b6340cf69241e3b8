#pragma once
/// @file grpc_service.hpp
/// Envoy's envoy.service.ratelimit.v3.RateLimitService over gRPC, answered by the workers.

#include <grpcpp/server_builder.h>

#include <memory>
#include <vector>

#include "rls.grpc.pb.h"
#include "worker.hpp"

namespace redlimit_server {

/// ShouldRateLimit on gRPC's asynchronous API: each worker takes the calls of a completion queue
/// of its own, and decides and answers each on its thread, so that no call crosses a thread.
/// Errors: INVALID_ARGUMENT for a call the Decider refuses (InvalidCall), UNAVAILABLE when Redis
/// could not answer and the domain's failure policy did not either (or the server is stopping),
/// INTERNAL otherwise.
class RateLimitGrpcService {
 public:
  /// Registers the service with `builder`, with a completion queue for each of `workers`.
  RateLimitGrpcService(grpc::ServerBuilder& builder, std::size_t workers);

  /// Once the server is built: each worker takes the calls of its queue until it stops. The
  /// service must outlive the workers.
  void serve(const std::vector<std::unique_ptr<Worker>>& workers);

 private:
  envoy::service::ratelimit::v3::RateLimitService::AsyncService service_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
};

/// The gRPC status for the error that ended a call.
grpc::Status status_of(const std::exception_ptr& error);

}  // namespace redlimit_server
