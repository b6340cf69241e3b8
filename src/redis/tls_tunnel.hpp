#pragma once

#include <netdb.h>
#include <openssl/ssl.h>
#include <uv.h>

#include <array>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "redis/endpoint.hpp"
#include "redis/tls_context.hpp"
#include "runtime/close_latch.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit::detail {

/// Carries one hiredis connection over TLS. hiredis 0.14 has neither TLS nor pluggable I/O, so
/// hiredis talks plaintext to the tunnel over a unix socket (a new path in the TlsContext's
/// private directory, accepted once), and the tunnel speaks TLS to the server on a TCP
/// connection of its own, through OpenSSL memory BIOs, all on the loop's thread.
///
/// Writes never raise SIGPIPE: the tunnel writes only with uv_try_write under a SigpipeGuard,
/// and keeps what a socket did not take for a retry timer (libuv's own queued writes would
/// run unguarded inside uv_run).
///
/// Lifetime: made by open(), ended by close() or by its own failure; it frees itself once its
/// uv handles (and its name lookup) have closed, each of which reports to the latch.
class TlsTunnel {
 public:
  /// What the tunnel tells its owner when it fails, once, never after close(): a TlsError (the
  /// handshake failed: a certificate, a refusal, not TLS) or a ConnectionError (the network).
  /// Called from the tunnel's uv callbacks, never inside hiredis; the tunnel is closed by then.
  using FailureCallback = void (*)(void* owner, std::exception_ptr error);

  /// Starts a tunnel to `server`: listens on a new unix socket path, resolves the server's host
  /// (an address literal at once, a name by uv_getaddrinfo) and connects to its addresses in
  /// turn, then shakes hands. Throws ConnectionError when the listening socket cannot be made
  /// (nothing is left open then).
  static TlsTunnel* open(uv_loop_t* loop, std::shared_ptr<TlsContext> tls, const Endpoint& server,
                         std::shared_ptr<CloseLatch> latch, FailureCallback on_failure,
                         void* owner);

  /// Where hiredis connects (redisAsyncConnectUnix).
  const std::string& path() const noexcept { return path_; }
  /// Whether the TLS handshake with the server has completed.
  bool handshake_done() const noexcept { return handshake_done_; }
  /// Stops: the owner hears nothing more. Idempotent.
  void close();

 private:
  /// Bytes one socket did not take yet, sent by the retry timer.
  struct Backlog {
    uv_stream_t* stream = nullptr;
    std::string bytes;
  };

  TlsTunnel(uv_loop_t* loop, std::shared_ptr<TlsContext> tls, const Endpoint& server,
            std::shared_ptr<CloseLatch> latch, FailureCallback on_failure, void* owner);
  ~TlsTunnel();
  TlsTunnel(const TlsTunnel&) = delete;
  TlsTunnel& operator=(const TlsTunnel&) = delete;

  static void on_plain_connection(uv_stream_t* listener, int status);
  static void on_resolved(uv_getaddrinfo_t* request, int status, addrinfo* addresses);
  static void on_connected(uv_connect_t* request, int status);
  /// Lends read_buffer_ to a read: each read is handled whole in its callback.
  static void lend_buffer(uv_handle_t* handle, std::size_t, uv_buf_t* buffer);
  static void on_server_read(uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer);
  static void on_plain_read(uv_stream_t* stream, ssize_t size, const uv_buf_t* buffer);
  static void on_retry(uv_timer_t* timer);
  static void on_closed(void* tunnel) noexcept;

  void listen();
  /// Connects to the next address of the lookup (or fails when none is left).
  void connect_next(const std::string& why_not_the_last);
  void continue_handshake();
  /// The handshake is done: plaintext flows from hiredis once its connection is accepted.
  void start_plaintext();
  /// Decrypts what the server sent and passes it to hiredis.
  void read_from_server();
  /// Sends what OpenSSL has written for the server.
  void flush_to_server();
  /// Writes what `backlog`'s socket takes now, keeps the rest for the retry timer.
  void send(Backlog& backlog, const char* data, std::size_t size);
  /// uv_try_write under a SigpipeGuard: the bytes taken (0 when the socket is full); a failed
  /// write fails the tunnel.
  std::size_t try_write(uv_stream_t* stream, const char* data, std::size_t size);
  /// Why the TLS session failed, after an OpenSSL call returned `result`.
  std::exception_ptr tls_failure(int result, const char* during);
  void fail(std::exception_ptr error);
  /// Counts `handle`, just made, among those close() waits for.
  template <class T>
  void open_handle(UvHandle<T>& handle);
  void unlink_path();
  void free_when_done();

  uv_loop_t* loop_;
  std::shared_ptr<TlsContext> tls_;
  Endpoint server_;
  std::shared_ptr<CloseLatch> latch_;
  FailureCallback on_failure_;
  void* owner_;
  std::string path_;
  bool guard_sigpipe_;
  SSL* session_ = nullptr;                   ///< owned (SSL_free in the destructor), with both BIOs
  BIO* from_server_ = nullptr;               ///< ciphertext received, for OpenSSL to read
  BIO* to_server_ = nullptr;                 ///< ciphertext OpenSSL wrote, to send
  std::vector<sockaddr_storage> addresses_;  ///< the server's, from the lookup
  std::size_t next_address_ = 0;             ///< the one connect_next() tries
  // Why this object frees itself only after every close callback (and the name lookup's
  // callback) has run: each handle's data, and the requests, point at it. The TCP handle is
  // made anew for each address tried.
  UvHandle<uv_pipe_t> listener_;
  UvHandle<uv_pipe_t> plain_;  ///< hiredis's connection, once accepted
  UvHandle<uv_tcp_t> tcp_;
  UvHandle<uv_timer_t> retry_;
  uv_getaddrinfo_t resolve_{};
  uv_connect_t connect_{};
  Backlog to_server_backlog_;
  Backlog to_plain_backlog_;
  std::array<char, 16 * 1024> read_buffer_;  ///< what a read of either socket fills
  int open_ = 0;  ///< handles not yet closed, plus the name lookup while it runs
  bool listening_ = false;
  bool accepted_ = false;
  bool resolving_ = false;
  bool connected_ = false;
  bool handshake_done_ = false;
  bool closed_ = false;
};

}  // namespace redlimit::detail
