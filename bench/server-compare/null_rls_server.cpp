// null_rls_server: Envoy's RateLimitService answering every call OK at once, deciding nothing:
// the gRPC ceiling that bench/server-compare measures redlimit-server against (the same
// messages, the same gRPC library, no rate limiting), on gRPC's callback API or on its
// asynchronous API with completion queues served by threads of their own. Its answer is a code
// per descriptor, or with --full-answer the fields redlimit-server fills for the benchmark's
// limit (its current limit, remaining and reset, and the two IETF header fields), constant.
//
// usage: null_rls_server [--listen HOST:PORT] [--queues N] [--full-answer]
//        (prints "null_rls_server: serving grpc=PORT")
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include "rls.grpc.pb.h"

namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

/// Whether answers carry what redlimit-server answers (--full-answer), not a code alone.
bool full_answer = false;

/// Answers OK to every descriptor of `request`.
void answer(const RateLimitRequest& request, RateLimitResponse& response) {
  response.set_overall_code(RateLimitResponse::OK);
  for (int i = 0; i < request.descriptors_size(); ++i) {
    RateLimitResponse::DescriptorStatus& status = *response.add_statuses();
    status.set_code(RateLimitResponse::OK);
    if (!full_answer) continue;
    // As redlimit-server answers bench/server-compare's limit: 100 per minute, one used.
    status.mutable_current_limit()->set_requests_per_unit(100);
    status.mutable_current_limit()->set_unit(RateLimitResponse::RateLimit::MINUTE);
    status.set_limit_remaining(99);
    status.mutable_duration_until_reset()->set_seconds(50);
    status.mutable_duration_until_reset()->set_nanos(257'275'000);
  }
  if (!full_answer) return;
  auto* policy = response.add_response_headers_to_add();
  policy->set_key("RateLimit-Policy");
  policy->set_value("\"bench.user\";q=100;w=60");
  auto* fields = response.add_response_headers_to_add();
  fields->set_key("RateLimit");
  fields->set_value("\"bench.user\";r=99;t=51");
}

class NullService final : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const RateLimitRequest* request,
                                            RateLimitResponse* response) override {
    answer(*request, *response);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

/// One call of the asynchronous API, answered OK as soon as it comes.
class NullCall {
 public:
  NullCall(RateLimitService::AsyncService& service, grpc::ServerCompletionQueue& queue)
      : service_(service), queue_(queue) {
    service_.RequestShouldRateLimit(&context_, &request_, &responder_, &queue_, &queue_, this);
  }

  void on_event(bool ok) {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    new NullCall(service_, queue_);
    answer(request_, response_);
    answered_ = true;
    responder_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  RateLimitService::AsyncService& service_;
  grpc::ServerCompletionQueue& queue_;
  grpc::ServerContext context_;
  RateLimitRequest request_;
  RateLimitResponse response_;
  grpc::ServerAsyncResponseWriter<RateLimitResponse> responder_{&context_};
  bool answered_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  unsigned queues = 0;
  CLI::App app{"A RateLimitService that answers OK at once: the gRPC ceiling"};
  app.add_option("--listen", listen, "HOST:PORT (port 0: any free)")->capture_default_str();
  app.add_option("--queues", queues,
                 "0: gRPC's callback API; N: its asynchronous API, N completion queues each "
                 "served by a thread of its own")
      ->capture_default_str();
  app.add_flag("--full-answer", full_answer,
               "answer with the fields redlimit-server fills for bench/server-compare's limit, "
               "not a code alone");
  CLI11_PARSE(app, argc, argv);
  NullService callback_service;
  RateLimitService::AsyncService async_service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> completion_queues;
  if (queues == 0) {
    builder.RegisterService(&callback_service);
  } else {
    builder.RegisterService(&async_service);
    for (unsigned i = 0; i < queues; ++i)
      completion_queues.push_back(builder.AddCompletionQueue());
  }
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "null_rls_server: cannot listen on %s\n", listen.c_str());
    return 2;
  }
  std::printf("null_rls_server: serving grpc=%d\n", port);
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (auto& queue : completion_queues) {
    threads.emplace_back([&async_service, queue = queue.get()] {
      for (int i = 0; i < 64; ++i)
        new NullCall(async_service, *queue);
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok))
        static_cast<NullCall*>(tag)->on_event(ok);
    });
  }
  server->Wait();  // until killed
}
