#include "http_message.hpp"

#include <cstddef>
#include <ctime>
#include <string_view>

namespace http_gateway {
namespace {

/// The reason phrases of the statuses the gateway sends (RFC 9112 allows an empty one).
std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 405:
      return "Method Not Allowed";
    case 429:
      return "Too Many Requests";
    case 503:
      return "Service Unavailable";
    default:
      return "";
  }
}

/// The current time as an IMF-fixdate (RFC 9110 §5.6.7). The program never calls setlocale(),
/// so strftime's day and month names are the C locale's English ones the format requires.
std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[40];
  const std::size_t length = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return std::string(text, length);
}

}  // namespace

std::string serialize(const Response& response, bool keep_alive, bool head) {
  std::string out;
  out.reserve(512 + response.body.size());
  out.append("HTTP/1.1 ").append(std::to_string(response.status)).append(" ");
  out.append(reason_phrase(response.status)).append("\r\n");
  out.append("Date: ").append(http_date()).append("\r\n");
  for (const auto& [name, value] : response.headers) {
    out.append(name).append(": ").append(value).append("\r\n");
  }
  out.append("Content-Type: ").append(response.content_type).append("\r\n");
  out.append("Content-Length: ").append(std::to_string(response.body.size())).append("\r\n");
  out.append(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  out.append("\r\n");
  if (!head) out.append(response.body);
  return out;
}

}  // namespace http_gateway
