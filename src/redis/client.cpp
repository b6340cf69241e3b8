#include "redlimit/client.hpp"

#include "redis/command_dispatcher.hpp"

namespace redlimit {

Client::Client(uv_loop_t* loop, ClientOptions options)
    : dispatcher_(std::make_shared<detail::CommandDispatcher>(loop, std::move(options))) {}

Client::~Client() = default;
Client::Client(Client&& other) noexcept = default;
Client& Client::operator=(Client&& other) noexcept = default;

Task<void> Client::connect() {
  return dispatcher_->connect();
}
Task<void> Client::close() {
  return dispatcher_->close();
}
Task<Reply> Client::command(std::vector<std::string> argv) {
  return dispatcher_->command(std::move(argv));
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
