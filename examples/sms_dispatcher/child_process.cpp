#include "child_process.hpp"

#include <stdexcept>
#include <utility>

struct ChildProcess::Handles {
  uv_process_t process;
  uv_pipe_t output;
  ChildProcess* owner;
  int open = 0;  ///< handles not yet closed
};

namespace {

void close_one(uv_handle_t* handle) {
  uv_close(handle, [](uv_handle_t* closed) {
    auto* handles = static_cast<ChildProcess::Handles*>(closed->data);
    if (--handles->open == 0) delete handles;
  });
}

}  // namespace

ChildProcess::ChildProcess(uv_loop_t* loop, const std::vector<std::string>& args,
                           std::function<void(const std::string&)> on_line)
    : handles_(new Handles{}), on_line_(std::move(on_line)) {
  handles_->owner = this;
  handles_->process.data = handles_;
  handles_->output.data = handles_;

  std::vector<char*> argv;
  for (const std::string& arg : args)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  if (on_line_) {
    uv_pipe_init(loop, &handles_->output, 0);
    ++handles_->open;
    output_closed_ = false;
    stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&handles_->output);
  } else {
    stdio[1].flags = UV_IGNORE;
  }
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;

  uv_process_options_t options{};
  options.file = argv[0];
  options.args = argv.data();
  options.stdio = stdio;
  options.stdio_count = 3;
  options.exit_cb = [](uv_process_t* process, int64_t status, int signal) {
    auto* handles = static_cast<Handles*>(process->data);
    if (ChildProcess* owner = handles->owner) {
      owner->exit_status_ = signal != 0 ? 128 + signal : static_cast<int>(status);
      owner->maybe_finish();
    }
  };
  const int error = uv_spawn(loop, &handles_->process, &options);
  ++handles_->open;  // uv_spawn initializes the process handle even when it fails
  if (error != 0) {
    close_one(reinterpret_cast<uv_handle_t*>(&handles_->process));
    if (on_line_) close_one(reinterpret_cast<uv_handle_t*>(&handles_->output));
    handles_->owner = nullptr;
    throw std::runtime_error("cannot start " + args[0] + ": " + uv_strerror(error));
  }
  if (!on_line_) return;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&handles_->output),
      [](uv_handle_t*, std::size_t suggested, uv_buf_t* buffer) {
        *buffer = uv_buf_init(new char[suggested], static_cast<unsigned>(suggested));
      },
      [](uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer) {
        auto* handles = static_cast<Handles*>(stream->data);
        ChildProcess* owner = handles->owner;
        if (owner != nullptr && size > 0) {
          owner->pending_.append(buffer->base, static_cast<std::size_t>(size));
          std::size_t end;
          while ((end = owner->pending_.find('\n')) != std::string::npos) {
            const std::string line = owner->pending_.substr(0, end);
            owner->pending_.erase(0, end + 1);
            owner->on_line_(line);
          }
        } else if (size < 0) {
          uv_read_stop(stream);
          if (owner != nullptr) {
            owner->output_closed_ = true;
            owner->maybe_finish();
          }
        }
        delete[] buffer->base;
      });
}

ChildProcess::~ChildProcess() {
  handles_->owner = nullptr;
  if (exit_status_ < 0) uv_process_kill(&handles_->process, SIGKILL);
  close_one(reinterpret_cast<uv_handle_t*>(&handles_->process));
  if (on_line_) close_one(reinterpret_cast<uv_handle_t*>(&handles_->output));
}

void ChildProcess::kill(int signal) {
  if (exit_status_ < 0) uv_process_kill(&handles_->process, signal);
}

bool ChildProcess::finished() const noexcept {
  return exit_status_ >= 0 && output_closed_;
}

void ChildProcess::maybe_finish() {
  if (!finished()) return;
  if (auto waiting = std::exchange(waiting_, {})) waiting.resume();
}
