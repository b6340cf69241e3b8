#pragma once
/// @file call_arenas.hpp
/// CallArenas: each ShouldRateLimit call's request and response on one protobuf Arena, from a
/// pool.

#include <grpcpp/support/message_allocator.h>

#include <memory>
#include <mutex>
#include <vector>

#include "rls.pb.h"

namespace redlimit_server {

/// gRPC's MessageAllocator for ShouldRateLimit: a call's request and response (and their
/// descriptors, statuses and headers) live on one Arena, which the call takes from a pool and
/// gives back when gRPC releases it. Why: a call is parsed on a gRPC thread and answered on a
/// worker's, so each message part allocated and freed on its own was also freed on another
/// thread than its own, malloc's slow path. Thread-safe; it must outlive the gRPC server.
class CallArenas final
    : public grpc::MessageAllocator<envoy::service::ratelimit::v3::RateLimitRequest,
                                    envoy::service::ratelimit::v3::RateLimitResponse> {
 public:
  CallArenas();
  ~CallArenas() override;
  CallArenas(const CallArenas&) = delete;
  CallArenas& operator=(const CallArenas&) = delete;

  /// An empty request and response on an arena of the pool (a new one when none is free).
  grpc::MessageHolder<envoy::service::ratelimit::v3::RateLimitRequest,
                      envoy::service::ratelimit::v3::RateLimitResponse>*
  AllocateMessages() override;

  /// The arenas made so far (in use or free).
  std::size_t made() const;

 private:
  class Holder;
  /// Takes `holder` back, its arena reset, for the next call.
  void give_back(Holder* holder);

  mutable std::mutex mutex_;
  std::vector<Holder*> free_;  ///< under mutex_
  std::size_t made_ = 0;       ///< under mutex_
};

}  // namespace redlimit_server
