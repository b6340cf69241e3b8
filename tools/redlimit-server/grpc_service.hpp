#pragma once
/// @file grpc_service.hpp
/// Envoy's envoy.service.ratelimit.v3.RateLimitService over gRPC, answered by the workers.

#include <atomic>
#include <memory>
#include <vector>

#include "call_arenas.hpp"
#include "rls.grpc.pb.h"
#include "worker.hpp"

namespace redlimit_server {

/// ShouldRateLimit on gRPC's callback API: each call goes to a worker already awake (from the
/// next in turn), else to the next in turn (round robin), and is finished from that worker's
/// thread; its messages live on an arena (CallArenas). Errors:
/// INVALID_ARGUMENT for a call the Decider refuses (InvalidCall), UNAVAILABLE when Redis could not
/// answer and the domain's failure policy did not either, INTERNAL otherwise.
class RateLimitGrpcService final
    : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  /// The workers must outlive the service's calls (shut the gRPC server down first).
  explicit RateLimitGrpcService(std::vector<std::unique_ptr<Worker>>& workers);

  grpc::ServerUnaryReactor* ShouldRateLimit(
      grpc::CallbackServerContext* context,
      const envoy::service::ratelimit::v3::RateLimitRequest* request,
      envoy::service::ratelimit::v3::RateLimitResponse* response) override;

 private:
  /// The worker for the next call.
  Worker& pick_worker();

  std::vector<std::unique_ptr<Worker>>& workers_;
  std::atomic<std::size_t> next_{0};
  CallArenas arenas_;
};

/// The gRPC status for the error that ended a call.
grpc::Status status_of(const std::exception_ptr& error);

}  // namespace redlimit_server
