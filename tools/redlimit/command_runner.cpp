#include "command_runner.hpp"

#include <spdlog/logger.h>
#include <uv.h>

#include <csignal>
#include <exception>
#include <optional>

#include "exit_status.hpp"
#include "output.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/redis_keys.hpp"
#include "redlimit/runtime.hpp"
#include "url_redaction.hpp"

namespace redlimit_cli {
namespace {

using namespace std::chrono_literals;

/// SIGINT and SIGTERM request a stop (watch then ends as after --once). One owner of the two
/// uv handles: close() them, and run the loop until closed() before closing the loop.
class StopSignals {
 public:
  explicit StopSignals(uv_loop_t* loop) {
    for (uv_signal_t* handle : {&interrupt_, &terminate_}) {
      uv_signal_init(loop, handle);
      handle->data = this;
    }
    uv_signal_start(&interrupt_, &StopSignals::on_signal, SIGINT);
    uv_signal_start(&terminate_, &StopSignals::on_signal, SIGTERM);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  std::stop_token token() const { return stop_.get_token(); }
  void close() {
    for (uv_signal_t* handle : {&interrupt_, &terminate_})
      uv_close(reinterpret_cast<uv_handle_t*>(handle), &StopSignals::on_closed);
  }
  bool closed() const noexcept { return open_handles_ == 0; }

 private:
  static void on_signal(uv_signal_t* handle, int) {
    static_cast<StopSignals*>(handle->data)->stop_.request_stop();
  }
  static void on_closed(uv_handle_t* handle) {
    --static_cast<StopSignals*>(handle->data)->open_handles_;
  }

  std::stop_source stop_;
  int open_handles_ = 2;
  uv_signal_t interrupt_;
  uv_signal_t terminate_;
};

redlimit::ClientOptions client_options(const GlobalOptions& global) {
  redlimit::ClientOptions options;
  options.url = global.url;
  options.tls = global.tls;
  options.sentinel_password = global.sentinel_password;
  options.id = global.client_id;
  // Why 2 s: a person waits for the answer; a slow link still gets one, a dead one fails soon.
  options.connect_timeout = 2s;
  options.command_timeout = 2s;
  // Why a logger without sinks: every failure the command meets is printed once, as its error.
  options.logger = std::make_shared<spdlog::logger>("redlimit-command");
  // Why off: the command's own calls (peeks) are not the fleet's decisions.
  options.stats_interval = 0ms;
  return options;
}

struct Failure {
  int status;
  std::string message;
};

Failure failure_of(std::exception_ptr error, const std::string& shown_url) {
  try {
    std::rethrow_exception(error);
  } catch (const CommandError& e) {
    return {e.status(), e.what()};
  } catch (const redlimit::InvalidArgument& e) {
    return {exit_usage, e.what()};
  } catch (const redlimit::PolicyNotFound& e) {
    return {exit_not_found, e.what()};
  } catch (const redlimit::Unavailable& e) {
    return {exit_unavailable, "Redis at " + shown_url + " did not answer: " + e.what()};
  } catch (const redlimit::ConfigError& e) {
    return {exit_unavailable, "Redis at " + shown_url + ": " + e.what()};
  } catch (const std::exception& e) {
    return {exit_failed, e.what()};
  }
}

}  // namespace

int run_command(const GlobalOptions& options, CommandBody body) {
  const Redactor redact(options.url, options.sentinel_password);
  // Why here: a prefix no limiter accepts names no key, and every command would find nothing.
  if (!redlimit::is_valid_prefix(options.prefix)) {
    print_error("--prefix must be 1 to 64 characters from [A-Za-z0-9_.-], got '" + options.prefix +
                "'");
    return exit_usage;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = exit_failed;
  {
    std::optional<redlimit::Client> client;
    try {
      client.emplace(&loop, client_options(options));
    } catch (const std::exception& e) {
      // Why usage: what a Client's construction refuses is its options, here the URL.
      print_error(redact(e.what()));
      status = exit_usage;
    }
    if (client) {
      StopSignals signals(&loop);
      try {
        // Why no connect() first: a command may refuse its arguments before any I/O (the
        // client connects on the first command).
        status = redlimit::run(&loop, body(*client, signals.token()));
      } catch (...) {
        const Failure failure = failure_of(std::current_exception(), redact.shown_url());
        print_error(redact(failure.message));
        status = failure.status;
      }
      redlimit::run(&loop, client->close());
      signals.close();
      while (!signals.closed())
        uv_run(&loop, UV_RUN_NOWAIT);
    }
  }
  const int closed = uv_loop_close(&loop);
  if (closed != 0) {
    print_error(std::string("uv_loop_close: ") + uv_strerror(closed));
    return exit_failed;
  }
  return status;
}

}  // namespace redlimit_cli
