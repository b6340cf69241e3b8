#include "redlimit/client.hpp"

#include "fleet/stats_publisher.hpp"
#include "limiter/replica_writes.hpp"
#include "redis/command_dispatcher.hpp"

namespace redlimit {
namespace {

/// `task`, holding `dispatcher`: the Client may be destroyed before the task runs (a callback
/// style shutdown starts close() and lets the Client go).
template <class T>
Task<T> keeping(std::shared_ptr<detail::CommandDispatcher> dispatcher, Task<T> task) {
  (void)dispatcher;
  co_return co_await std::move(task);
}

/// Client::close(): the last counts first, while the client still sends commands.
Task<void> close_client(std::shared_ptr<detail::CommandDispatcher> dispatcher,
                        std::shared_ptr<detail::StatsPublisher> stats) {
  if (stats) co_await stats->close();
  co_await dispatcher->close();
}

}  // namespace

Client::Client(uv_loop_t* loop, ClientOptions options)
    : dispatcher_(std::make_shared<detail::CommandDispatcher>(loop, std::move(options))),
      stats_(dispatcher_->options().stats_interval.count() != 0
                 ? std::make_shared<detail::StatsPublisher>(dispatcher_,
                                                            dispatcher_->options().stats_interval)
                 : nullptr) {
  // Why here: every script call of this client (limiters, semaphores, policy stores) is one of
  // the library's, whose replies say whether it wrote (ClientOptions::replicas).
  dispatcher_->set_write_test(&detail::reply_wrote);
}

Client::~Client() = default;
Client::Client(Client&& other) noexcept = default;
Client& Client::operator=(Client&& other) noexcept = default;

Task<void> Client::connect() {
  return keeping(dispatcher_, dispatcher_->connect());
}
Task<void> Client::close() {
  return close_client(dispatcher_, stats_);
}
Task<Reply> Client::command(std::vector<std::string> argv) {
  return keeping(dispatcher_, dispatcher_->command(std::move(argv)));
}
uv_loop_t* Client::loop() const noexcept {
  return dispatcher_->loop();
}
const ClientOptions& Client::options() const noexcept {
  return dispatcher_->options();
}

const std::shared_ptr<Metrics>& Client::metrics() const noexcept {
  return dispatcher_->options().metrics;
}

const std::string& Client::id() const noexcept {
  return dispatcher_->options().id;
}

}  // namespace redlimit
