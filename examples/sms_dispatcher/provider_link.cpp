#include "provider_link.hpp"

#include <cstring>

namespace {

/// A write request that owns its bytes.
struct Write {
  uv_write_t request;
  std::string bytes;
};

}  // namespace

ProviderLink::ProviderLink(uv_loop_t* loop, std::function<void(Reply)> on_reply)
    : handle_(new uv_tcp_t), on_reply_(std::move(on_reply)) {
  uv_tcp_init(loop, handle_);
  handle_->data = this;
}

ProviderLink::~ProviderLink() {
  close();
}

int ProviderLink::start_connect(int port, std::function<void(int)> done) {
  on_connected_ = std::move(done);
  sockaddr_in address{};
  uv_ip4_addr("127.0.0.1", port, &address);
  auto* request = new uv_connect_t;
  request->data = this;
  const int error = uv_tcp_connect(
      request, handle_, reinterpret_cast<const sockaddr*>(&address),
      [](uv_connect_t* request, int status) {
        auto* self = static_cast<ProviderLink*>(request->data);
        delete request;
        if (status == UV_ECANCELED) return;  // closed while connecting: nobody waits any more
        if (status == 0) {
          uv_tcp_nodelay(self->handle_, 1);
          uv_read_start(
              reinterpret_cast<uv_stream_t*>(self->handle_),
              [](uv_handle_t*, std::size_t suggested, uv_buf_t* buffer) {
                *buffer = uv_buf_init(new char[suggested], static_cast<unsigned>(suggested));
              },
              [](uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer) {
                auto* link = static_cast<ProviderLink*>(stream->data);
                if (size > 0) {
                  link->pending_.append(buffer->base, static_cast<std::size_t>(size));
                  std::size_t end;
                  while ((end = link->pending_.find('\n')) != std::string::npos) {
                    const bool accepted = link->pending_.compare(0, end, "OK") == 0;
                    link->pending_.erase(0, end + 1);
                    link->on_reply_(accepted ? Reply::accepted : Reply::rejected);
                  }
                } else if (size < 0) {
                  uv_read_stop(stream);
                  link->on_reply_(Reply::connection_lost);
                }
                delete[] buffer->base;
              });
        }
        // Why last: the awaiting coroutine may destroy this link when it resumes.
        auto done = std::move(self->on_connected_);
        done(status);
      });
  if (error != 0) {
    delete request;
    on_connected_ = nullptr;
  }
  return error;
}

void ProviderLink::send(std::string line) {
  if (closed_) return;
  auto* write = new Write{{}, std::move(line)};
  write->request.data = write;
  uv_buf_t buffer = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
  const int error =
      uv_write(&write->request, reinterpret_cast<uv_stream_t*>(handle_), &buffer, 1,
               [](uv_write_t* request, int) { delete static_cast<Write*>(request->data); });
  if (error != 0) delete write;
}

void ProviderLink::close() {
  if (closed_) return;
  closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(handle_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_tcp_t*>(h); });
}
