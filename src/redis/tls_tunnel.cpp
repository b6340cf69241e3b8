#include "redis/tls_tunnel.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "redlimit/errors.hpp"
#include "runtime/close_latch.hpp"

namespace redlimit::detail {
namespace {

/// Bytes read from a socket at a time, and decrypted at a time.
constexpr std::size_t chunk_size = 16 * 1024;

/// One uv_write of a copy of its bytes: freed by its callback (also when the write is
/// cancelled because its handle closed).
struct WriteRequest {
  uv_write_t request;
  std::string data;
};

void on_written(uv_write_t* request, int) {
  delete reinterpret_cast<WriteRequest*>(request);
}

}  // namespace

TlsTunnel* TlsTunnel::open(uv_loop_t* loop, std::shared_ptr<TlsContext> tls, const Endpoint& server,
                           std::shared_ptr<CloseLatch> latch, FailureCallback on_failure,
                           void* owner) {
  auto* tunnel = new TlsTunnel(loop, std::move(tls), server, std::move(latch), on_failure, owner);
  try {
    tunnel->listen();
  } catch (...) {
    tunnel->close();
    throw;
  }
  // The name lookup comes last: it may complete (and fail) only from the loop.
  tunnel->resolving_ = true;
  tunnel->resolve_.data = tunnel;
  ++tunnel->open_;
  tunnel->latch_->opened();
  const std::string port = std::to_string(server.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int resolving = uv_getaddrinfo(loop, &tunnel->resolve_, &on_resolved, server.host.c_str(),
                                       port.c_str(), &hints);
  if (resolving != 0) {
    tunnel->resolving_ = false;
    --tunnel->open_;
    tunnel->latch_->closed();
    tunnel->close();
    throw ConnectionError("cannot resolve " + server.display() + ": " + uv_strerror(resolving));
  }
  return tunnel;
}

TlsTunnel::TlsTunnel(uv_loop_t* loop, std::shared_ptr<TlsContext> tls, const Endpoint& server,
                     std::shared_ptr<CloseLatch> latch, FailureCallback on_failure, void* owner)
    : loop_(loop),
      tls_(std::move(tls)),
      server_(server),
      latch_(std::move(latch)),
      on_failure_(on_failure),
      owner_(owner) {}

TlsTunnel::~TlsTunnel() {
  if (session_ != nullptr) SSL_free(session_);
}

void TlsTunnel::listen() {
  session_ = tls_->new_session(server_.host);
  from_server_ = BIO_new(BIO_s_mem());
  to_server_ = BIO_new(BIO_s_mem());
  if (from_server_ == nullptr || to_server_ == nullptr) {
    BIO_free(from_server_);
    BIO_free(to_server_);
    throw ConnectionError("TLS: cannot allocate the buffers of a connection");
  }
  SSL_set_bio(session_, from_server_, to_server_);  // the session owns both from here on
  path_ = tls_->new_socket_path();
  uv_pipe_init(loop_, &listener_, 0);
  open_handle(reinterpret_cast<uv_handle_t*>(&listener_));
  int result = uv_pipe_bind(&listener_, path_.c_str());
  if (result == 0) {
    listening_ = true;
    result = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 1, &on_plain_connection);
  }
  if (result != 0) {
    throw ConnectionError("TLS: cannot listen on '" + path_ +
                          "' for hiredis: " + uv_strerror(result));
  }
}

void TlsTunnel::on_plain_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<TlsTunnel*>(listener->data);
  if (self->closed_ || self->accepted_) return;
  if (status == 0) {
    uv_pipe_init(self->loop_, &self->plain_, 0);
    self->open_handle(reinterpret_cast<uv_handle_t*>(&self->plain_));
    status = uv_accept(listener, reinterpret_cast<uv_stream_t*>(&self->plain_));
  }
  // Why close the listener at once: exactly one connection, hiredis's, may come through.
  self->close_handle(reinterpret_cast<uv_handle_t*>(&self->listener_));
  self->unlink_path();
  if (status != 0) {
    self->fail(std::make_exception_ptr(ConnectionError(
        std::string("TLS: cannot accept hiredis's connection: ") + uv_strerror(status))));
    return;
  }
  self->accepted_ = true;
  if (self->handshake_done_) self->start_plaintext();
}

void TlsTunnel::on_resolved(uv_getaddrinfo_t* request, int status, addrinfo* addresses) {
  auto* self = static_cast<TlsTunnel*>(request->data);
  self->resolving_ = false;
  --self->open_;
  // Why reported last: the latch must not reach zero while this opens the TCP handle.
  const std::shared_ptr<CloseLatch> latch = self->latch_;
  struct ReportLookupEnded {
    CloseLatch& latch;
    ~ReportLookupEnded() { latch.closed(); }
  } report{*latch};
  if (self->closed_ || status != 0) {
    if (addresses != nullptr) uv_freeaddrinfo(addresses);
    if (!self->closed_) {
      self->fail(std::make_exception_ptr(ConnectionError(
          "cannot resolve " + self->server_.display() + ": " + uv_strerror(status))));
    }
    self->free_when_done();
    return;
  }
  uv_tcp_init(self->loop_, &self->tcp_);
  self->open_handle(reinterpret_cast<uv_handle_t*>(&self->tcp_));
  self->tcp_open_ = true;
  uv_tcp_nodelay(&self->tcp_, 1);
  uv_tcp_keepalive(&self->tcp_, 1, 60);
  const int connecting =
      uv_tcp_connect(&self->connect_, &self->tcp_, addresses->ai_addr, &on_connected);
  uv_freeaddrinfo(addresses);
  if (connecting != 0) {
    self->fail(std::make_exception_ptr(ConnectionError(
        "cannot connect to " + self->server_.display() + ": " + uv_strerror(connecting))));
  }
}

void TlsTunnel::on_connected(uv_connect_t* request, int status) {
  auto* self = static_cast<TlsTunnel*>(request->handle->data);
  if (self->closed_) return;
  if (status != 0) {
    self->fail(std::make_exception_ptr(ConnectionError(
        "cannot connect to " + self->server_.display() + ": " + uv_strerror(status))));
    return;
  }
  uv_read_start(reinterpret_cast<uv_stream_t*>(&self->tcp_), &lend_buffer, &on_server_read);
  self->continue_handshake();
}

void TlsTunnel::continue_handshake() {
  const int result = SSL_do_handshake(session_);
  flush_to_server();
  if (result == 1) {
    handshake_done_ = true;
    if (accepted_) start_plaintext();
    // Bytes that came with the end of the handshake (a session ticket, or data).
    read_from_server();
    return;
  }
  if (SSL_get_error(session_, result) == SSL_ERROR_WANT_READ) return;
  fail(tls_failure(result, "during the handshake"));
}

void TlsTunnel::start_plaintext() {
  uv_read_start(reinterpret_cast<uv_stream_t*>(&plain_), &lend_buffer, &on_plain_read);
}

void TlsTunnel::lend_buffer(uv_handle_t* handle, std::size_t, uv_buf_t* buffer) {
  auto* self = static_cast<TlsTunnel*>(handle->data);
  *buffer =
      uv_buf_init(self->read_buffer_.data(), static_cast<unsigned>(self->read_buffer_.size()));
}

void TlsTunnel::on_server_read(uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer) {
  auto* self = static_cast<TlsTunnel*>(stream->data);
  if (self->closed_ || size == 0) return;
  if (size < 0) {
    const std::string when = self->handshake_done_ ? "" : " during the TLS handshake";
    self->fail(std::make_exception_ptr(ConnectionError(
        "redis " + self->server_.display() +
        (size == UV_EOF ? " closed the connection" + when
                        : ": " + std::string(uv_strerror(static_cast<int>(size))) + when))));
    return;
  }
  BIO_write(self->from_server_, buffer->base, static_cast<int>(size));
  if (self->handshake_done_) {
    self->read_from_server();
  } else {
    self->continue_handshake();
  }
}

void TlsTunnel::read_from_server() {
  char plain[chunk_size];
  for (;;) {
    const int size = SSL_read(session_, plain, sizeof plain);
    if (size > 0) {
      if (accepted_) write_to(reinterpret_cast<uv_stream_t*>(&plain_), plain, size);
      continue;
    }
    const int error = SSL_get_error(session_, size);
    flush_to_server();  // what reading made OpenSSL answer (a key update, an alert)
    if (error == SSL_ERROR_WANT_READ) return;
    if (error == SSL_ERROR_ZERO_RETURN) {
      fail(std::make_exception_ptr(
          ConnectionError("redis " + server_.display() + " ended the TLS session")));
      return;
    }
    fail(tls_failure(size, "while reading"));
    return;
  }
}

void TlsTunnel::on_plain_read(uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer) {
  auto* self = static_cast<TlsTunnel*>(stream->data);
  if (self->closed_ || size == 0) return;
  if (size < 0) {
    // hiredis closed its end: its context was dropped, and the owner closes the tunnel too.
    self->close();
    return;
  }
  // Why all of it at once: a memory BIO takes every byte (no partial writes).
  const int written = SSL_write(self->session_, buffer->base, static_cast<int>(size));
  if (written <= 0) {
    self->fail(self->tls_failure(written, "while writing"));
    return;
  }
  self->flush_to_server();
}

void TlsTunnel::flush_to_server() {
  char cipher[chunk_size];
  for (;;) {
    const int size = BIO_read(to_server_, cipher, sizeof cipher);
    if (size <= 0) return;
    if (tcp_open_) write_to(reinterpret_cast<uv_stream_t*>(&tcp_), cipher, size);
  }
}

void TlsTunnel::write_to(uv_stream_t* stream, const char* data, std::size_t size) {
  // Why try first: mostly the socket takes it all at once, with no copy and no request; while
  // an earlier write is queued, uv_try_write takes nothing, so the order is kept.
  uv_buf_t now = uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(size));
  const int taken = uv_try_write(stream, &now, 1);
  if (taken == static_cast<int>(size)) return;
  if (taken < 0 && taken != UV_EAGAIN) {
    fail(std::make_exception_ptr(
        ConnectionError(std::string("TLS: cannot write: ") + uv_strerror(taken))));
    return;
  }
  const std::size_t done = taken > 0 ? static_cast<std::size_t>(taken) : 0;
  auto* write = new WriteRequest{{}, std::string(data + done, size - done)};
  const uv_buf_t buffer =
      uv_buf_init(write->data.data(), static_cast<unsigned>(write->data.size()));
  const int result = uv_write(&write->request, stream, &buffer, 1, &on_written);
  if (result != 0) {
    delete write;
    fail(std::make_exception_ptr(
        ConnectionError(std::string("TLS: cannot write: ") + uv_strerror(result))));
  }
}

std::exception_ptr TlsTunnel::tls_failure(int result, const char* during) {
  const int error = SSL_get_error(session_, result);
  const long verified = SSL_get_verify_result(session_);
  const std::string server = "redis " + server_.display();
  if (tls_->verify_peer() && !handshake_done_ && verified != X509_V_OK) {
    ERR_clear_error();
    return std::make_exception_ptr(
        TlsError("TLS: the certificate of " + server +
                 " did not verify: " + X509_verify_cert_error_string(verified)));
  }
  if (error == SSL_ERROR_SSL) {
    return std::make_exception_ptr(TlsError(
        "TLS with " + server + " failed " + during + ": " + openssl_errors("no reason given") +
        (handshake_done_ ? "" : " (is it a TLS port, and does it accept this client?)")));
  }
  ERR_clear_error();
  return std::make_exception_ptr(ConnectionError("TLS with " + server + " failed " + during +
                                                 " (OpenSSL error " + std::to_string(error) + ")"));
}

void TlsTunnel::fail(std::exception_ptr error) {
  if (closed_) return;
  const FailureCallback notify = on_failure_;
  void* const owner = owner_;
  close();
  notify(owner, std::move(error));
}

void TlsTunnel::close() {
  if (closed_) return;
  closed_ = true;
  if (listening_) unlink_path();
  close_handle(reinterpret_cast<uv_handle_t*>(&listener_));
  if (accepted_) close_handle(reinterpret_cast<uv_handle_t*>(&plain_));
  if (tcp_open_) close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(&resolve_));
  free_when_done();
}

void TlsTunnel::open_handle(uv_handle_t* handle) {
  handle->data = this;
  ++open_;
  latch_->opened();
}

void TlsTunnel::close_handle(uv_handle_t* handle) {
  if (handle->data == nullptr || uv_is_closing(handle) != 0) return;
  uv_close(handle, &on_closed);
}

void TlsTunnel::on_closed(uv_handle_t* handle) {
  auto* self = static_cast<TlsTunnel*>(handle->data);
  --self->open_;
  // Why a copy: the latch may outlive this object, which may free itself below.
  const std::shared_ptr<CloseLatch> latch = self->latch_;
  self->free_when_done();
  latch->closed();
}

void TlsTunnel::unlink_path() {
  if (!std::exchange(listening_, false)) return;
  ::unlink(path_.c_str());
}

void TlsTunnel::free_when_done() {
  if (closed_ && open_ == 0) delete this;
}

}  // namespace redlimit::detail
