#include "redis/tls_tunnel.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string_view>

#include "redis/sigpipe_guard.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// Bytes decrypted, or sent to the server, at a time.
constexpr std::size_t chunk_size = 16 * 1024;

/// How long a socket that took only part of a write gets before the next try.
constexpr std::uint64_t retry_ms = 1;

/// `host:port` as one address, when `host` is an address literal (no lookup needed).
std::optional<sockaddr_storage> literal_address(const Endpoint& server) {
  sockaddr_storage address{};
  if (uv_ip4_addr(server.host.c_str(), server.port, reinterpret_cast<sockaddr_in*>(&address)) ==
          0 ||
      uv_ip6_addr(server.host.c_str(), server.port, reinterpret_cast<sockaddr_in6*>(&address)) ==
          0) {
    return address;
  }
  return std::nullopt;
}

template <class T>
uv_stream_t* stream_of(UvHandle<T>& handle) {
  return reinterpret_cast<uv_stream_t*>(handle.get());
}

}  // namespace

TlsTunnel* TlsTunnel::open(uv_loop_t* loop, std::shared_ptr<TlsContext> tls, const Endpoint& server,
                           std::shared_ptr<CloseLatch> latch, FailureCallback on_failure,
                           void* owner) {
  auto* tunnel = new TlsTunnel(loop, std::move(tls), server, std::move(latch), on_failure, owner);
  try {
    tunnel->listen();
  } catch (const UvError& e) {
    tunnel->close();
    throw ConnectionError(std::string("TLS: ") + e.what());
  } catch (...) {
    tunnel->close();
    throw;
  }
  // Why a literal at once: no thread of the pool, and nothing for close() to wait for.
  if (const std::optional<sockaddr_storage> literal = literal_address(server)) {
    tunnel->addresses_.push_back(*literal);
    tunnel->connect_next("");
    return tunnel;
  }
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
      owner_(owner),
      guard_sigpipe_(!sigpipe_ignored()) {}

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
  retry_.init(loop_, &uv_timer_init);
  open_handle(retry_);
  path_ = tls_->new_socket_path();
  listener_.init(loop_, &uv_pipe_init, 0);
  open_handle(listener_);
  int result = uv_pipe_bind(listener_.get(), path_.c_str());
  if (result == 0) {
    listening_ = true;
    result = uv_listen(stream_of(listener_), 1, &on_plain_connection);
  }
  if (result != 0) {
    throw ConnectionError("TLS: cannot listen on '" + path_ +
                          "' for hiredis: " + uv_strerror(result));
  }
}

void TlsTunnel::on_plain_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<TlsTunnel*>(listener->data);
  if (self->closed_ || self->plain_.is_open()) return;
  if (status == 0) {
    try {
      self->plain_.init(self->loop_, &uv_pipe_init, 0);
      self->open_handle(self->plain_);
      status = uv_accept(listener, stream_of(self->plain_));
    } catch (const UvError& e) {
      status = e.code();
    }
  }
  // Why close the listener at once: exactly one connection, hiredis's, may come through.
  self->listener_.close();
  self->unlink_path();
  if (status != 0) {
    self->fail(std::make_exception_ptr(ConnectionError(
        std::string("TLS: cannot accept hiredis's connection: ") + uv_strerror(status))));
    return;
  }
  self->accepted_ = true;
  self->to_plain_backlog_.stream = stream_of(self->plain_);
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
  for (const addrinfo* entry = addresses; entry != nullptr; entry = entry->ai_next) {
    sockaddr_storage address{};
    std::memcpy(&address, entry->ai_addr, entry->ai_addrlen);
    self->addresses_.push_back(address);
  }
  if (addresses != nullptr) uv_freeaddrinfo(addresses);
  if (self->closed_) {
    self->free_when_done();
    return;
  }
  if (status != 0) {
    self->fail(std::make_exception_ptr(
        ConnectionError("cannot resolve " + self->server_.display() + ": " + uv_strerror(status))));
    self->free_when_done();
    return;
  }
  self->connect_next("");
}

void TlsTunnel::connect_next(const std::string& why_not_the_last) {
  tcp_.close();
  if (next_address_ == addresses_.size()) {
    fail(std::make_exception_ptr(
        ConnectionError("cannot connect to " + server_.display() +
                        (why_not_the_last.empty() ? ": no address" : ": " + why_not_the_last))));
    return;
  }
  const auto* address = reinterpret_cast<const sockaddr*>(&addresses_[next_address_++]);
  try {
    tcp_.init(loop_, &uv_tcp_init);
  } catch (const UvError& e) {
    connect_next(e.what());
    return;
  }
  open_handle(tcp_);
  uv_tcp_nodelay(tcp_.get(), 1);
  uv_tcp_keepalive(tcp_.get(), 1, 60);
  to_server_backlog_.stream = stream_of(tcp_);
  const int connecting = uv_tcp_connect(&connect_, tcp_.get(), address, &on_connected);
  if (connecting != 0) connect_next(uv_strerror(connecting));
}

void TlsTunnel::on_connected(uv_connect_t* request, int status) {
  auto* self = static_cast<TlsTunnel*>(request->handle->data);
  // A cancelled connect (its handle closed) needs nothing more.
  if (self->closed_ || reinterpret_cast<uv_tcp_t*>(request->handle) != self->tcp_.get()) return;
  if (status != 0) {
    self->connect_next(uv_strerror(status));
    return;
  }
  self->connected_ = true;
  uv_read_start(stream_of(self->tcp_), &lend_buffer, &on_server_read);
  self->continue_handshake();
}

void TlsTunnel::continue_handshake() {
  // Why cleared first: SSL_get_error reads the thread's queue, which others may have left full.
  ERR_clear_error();
  const int result = SSL_do_handshake(session_);
  const int error = SSL_get_error(session_, result);
  flush_to_server();
  if (closed_) return;
  if (result == 1) {
    handshake_done_ = true;
    if (accepted_) start_plaintext();
    // Bytes that came with the end of the handshake (a session ticket, or data).
    read_from_server();
    return;
  }
  if (error == SSL_ERROR_WANT_READ) return;
  fail(tls_failure(result, "during the handshake"));
}

void TlsTunnel::start_plaintext() {
  uv_read_start(stream_of(plain_), &lend_buffer, &on_plain_read);
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
  while (!closed_) {
    ERR_clear_error();
    const int size = SSL_read(session_, plain, sizeof plain);
    if (size > 0) {
      // Why nothing is lost before the accept: the server answers only what hiredis sent.
      if (accepted_) send(to_plain_backlog_, plain, static_cast<std::size_t>(size));
      continue;
    }
    const int error = SSL_get_error(session_, size);
    flush_to_server();  // what reading made OpenSSL answer (a key update, an alert)
    if (closed_ || error == SSL_ERROR_WANT_READ) return;
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
    // hiredis closed its end first (the owner normally closes the tunnel before): said, so
    // that the owner forgets the tunnel.
    self->fail(std::make_exception_ptr(ConnectionError("TLS: hiredis closed its connection")));
    return;
  }
  ERR_clear_error();
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
  while (!closed_ && connected_) {
    const int size = BIO_read(to_server_, cipher, sizeof cipher);
    if (size <= 0) return;
    send(to_server_backlog_, cipher, static_cast<std::size_t>(size));
  }
}

void TlsTunnel::send(Backlog& backlog, const char* data, std::size_t size) {
  // Why behind the backlog: bytes must reach the socket in order.
  if (!backlog.bytes.empty()) {
    backlog.bytes.append(data, size);
    return;
  }
  const std::size_t taken = try_write(backlog.stream, data, size);
  if (closed_ || taken == size) return;
  backlog.bytes.assign(data + taken, size - taken);
  uv_timer_start(retry_.get(), &on_retry, retry_ms, 0);
}

std::size_t TlsTunnel::try_write(uv_stream_t* stream, const char* data, std::size_t size) {
  SigpipeGuard guard(guard_sigpipe_);
  uv_buf_t buffer = uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(size));
  const int taken = uv_try_write(stream, &buffer, 1);
  if (taken >= 0) return static_cast<std::size_t>(taken);
  if (taken == UV_EAGAIN) return 0;
  guard.write_failed();
  fail(std::make_exception_ptr(ConnectionError("TLS with redis " + server_.display() +
                                               ": cannot write: " + uv_strerror(taken))));
  return 0;
}

void TlsTunnel::on_retry(uv_timer_t* timer) {
  auto* self = static_cast<TlsTunnel*>(timer->data);
  for (Backlog* backlog : {&self->to_server_backlog_, &self->to_plain_backlog_}) {
    if (self->closed_ || backlog->bytes.empty()) continue;
    const std::size_t taken =
        self->try_write(backlog->stream, backlog->bytes.data(), backlog->bytes.size());
    backlog->bytes.erase(0, taken);
  }
  if (self->closed_) return;
  if (!self->to_server_backlog_.bytes.empty() || !self->to_plain_backlog_.bytes.empty()) {
    uv_timer_start(self->retry_.get(), &on_retry, retry_ms, 0);
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
  unlink_path();
  listener_.close();
  plain_.close();
  tcp_.close();
  retry_.close();
  if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(&resolve_));
  free_when_done();
}

template <class T>
void TlsTunnel::open_handle(UvHandle<T>& handle) {
  handle.handle()->data = this;
  handle.when_closed(&on_closed, this);
  ++open_;
  latch_->opened();
}

void TlsTunnel::on_closed(void* tunnel) noexcept {
  auto* self = static_cast<TlsTunnel*>(tunnel);
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
