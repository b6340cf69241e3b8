// null_rls_server: Envoy's RateLimitService answering every call OK at once, deciding nothing:
// the gRPC ceiling that bench/server-compare measures redlimit-server against (the same
// messages, the same gRPC library, no rate limiting).
//
// usage: null_rls_server [--listen HOST:PORT]   (prints "null_rls_server: serving grpc=PORT")
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "rls.grpc.pb.h"

namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;

class NullService final : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const RateLimitRequest* request,
                                            RateLimitResponse* response) override {
    response->set_overall_code(RateLimitResponse::OK);
    for (int i = 0; i < request->descriptors_size(); ++i)
      response->add_statuses()->set_code(RateLimitResponse::OK);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  CLI::App app{"A RateLimitService that answers OK at once: the gRPC ceiling"};
  app.add_option("--listen", listen, "HOST:PORT (port 0: any free)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  NullService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "null_rls_server: cannot listen on %s\n", listen.c_str());
    return 2;
  }
  std::printf("null_rls_server: serving grpc=%d\n", port);
  std::fflush(stdout);
  server->Wait();  // until killed
}
