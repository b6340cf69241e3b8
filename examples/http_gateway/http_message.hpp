#pragma once
/// @file http_message.hpp
/// The request and response values the HTTP glue exchanges with the application, and the
/// interface of the application's request handler.

#include <string>
#include <utility>
#include <vector>

#include "redlimit/task.hpp"

namespace http_gateway {

/// What the application sees of one request.
struct Request {
  std::string peer_ip;     ///< the client's address, e.g. "127.0.0.1" or "::1"
  std::string method;      ///< e.g. "GET"
  std::string target;      ///< the request target as sent, e.g. "/metrics" or "/a?b=c"
  std::string api_key;     ///< the first non-empty X-API-Key field, trimmed; empty if none
  bool head = false;       ///< a HEAD request: the response goes without its body
  bool malformed = false;  ///< http_parser rejected the bytes; the connection closes after
};

/// A response before serialization; the connection adds Date, Content-Length and Connection.
struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "text/plain";
  std::string body;
};

/// The bytes of `response` as HTTP/1.1. With `head`, the body is left out (Content-Length still
/// gives its size); `keep_alive` chooses the Connection field.
std::string serialize(const Response& response, bool keep_alive, bool head);

/// Answers requests; the HTTP glue awaits one handle() per request, in order per connection.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  /// The response to `request`. Failures should become responses: an exception closes the
  /// connection without one.
  virtual redlimit::Task<Response> handle(Request request) = 0;
};

}  // namespace http_gateway
