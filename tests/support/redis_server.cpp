#include "support/redis_server.hpp"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

#include "redis/reply_builder.hpp"
#include "support/child_process.hpp"

namespace redlimit::test {
namespace {

using namespace std::chrono_literals;

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
struct ReplyDeleter {
  void operator()(void* reply) const { detail::reply_builder()->freeObject(reply); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
/// A whole reply made by detail::reply_builder(); its Reply is detail::built_reply(get()).
using ReplyPtr = std::unique_ptr<void, ReplyDeleter>;

ReplyPtr send(redisContext* context, const std::vector<std::string>& argv) {
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const auto& part : argv) {
    pointers.push_back(part.c_str());
    lengths.push_back(part.size());
  }
  return ReplyPtr(
      redisCommandArgv(context, static_cast<int>(argv.size()), pointers.data(), lengths.data()));
}

/// A blocking connection, logged in with `password` if not empty; null when none could be made.
ContextPtr logged_in(ContextPtr context, const std::string& password) {
  if (!context || context->err != 0) return nullptr;
  context->reader->fn = detail::reply_builder();  // before the first command
  redisSetTimeout(context.get(), timeval{10, 0});
  if (!password.empty()) {
    ReplyPtr reply = send(context.get(), {"AUTH", password});
    if (!reply || detail::built_reply(reply.get()).type == Reply::Type::error) return nullptr;
  }
  return context;
}

// Why the unix socket: a server may serve TLS only (`--port 0`), and the test's own commands
// need none.
ContextPtr connect(const std::string& socket_path, const std::string& password) {
  const timeval timeout{2, 0};
  return logged_in(ContextPtr(redisConnectUnixWithTimeout(socket_path.c_str(), timeout)), password);
}

}  // namespace

Reply tcp_command(int port, const std::string& password, const std::vector<std::string>& argv) {
  const timeval timeout{2, 0};
  ContextPtr context =
      logged_in(ContextPtr(redisConnectWithTimeout("127.0.0.1", port, timeout)), password);
  if (!context) throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  ReplyPtr reply = send(context.get(), argv);
  if (!reply) throw std::runtime_error("no reply from 127.0.0.1:" + std::to_string(port));
  return std::move(detail::built_reply(reply.get()));
}

std::string redis_server_binary() {
  const char* configured = std::getenv("REDIS_SERVER");
  return configured != nullptr && *configured != '\0' ? configured : "redis-server";
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("free_port: cannot bind a loopback socket");
  }
  close(fd);
  return ntohs(address.sin_port);
}

RedisServer::RedisServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  for (std::size_t i = 0; i + 1 < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--requirepass") password_ = extra_args_[i + 1];
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "redlimit-redis-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  // Another process may take the port between free_port() and the server's bind: try again.
  for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) {
    port_ = free_port();
    spawn();
    try {
      wait_until_ready();
    } catch (const std::exception&) {
      kill();
      if (attempt == 4) throw;
    }
  }
}

RedisServer::~RedisServer() {
  kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::url() const {
  return "redis://127.0.0.1:" + std::to_string(port_);
}

void RedisServer::spawn() {
  std::vector<std::string> args = {redis_server_binary(),
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--unixsocket",
                                   socket_path(),
                                   "--dir",
                                   dir_,
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--enable-debug-command",
                                   "local",
                                   "--logfile",
                                   dir_ + "/redis.log",
                                   "--daemonize",
                                   "no"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = start_server_process(std::move(args));
}

void RedisServer::wait_until_ready() {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
    }
    if (ContextPtr context = connect(socket_path(), password_)) {
      ReplyPtr reply = send(context.get(), {"PING"});
      if (reply && detail::built_reply(reply.get()).type == Reply::Type::status) return;
    }
    std::this_thread::sleep_for(5ms);
  }
  throw std::runtime_error("redis-server did not answer PING within 10 s");
}

void RedisServer::stop() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::kill() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::pause() {
  ::kill(pid_, SIGSTOP);
  // Why waited for: kill() returns before the server stops, and a test that sends a command
  // next expects it unanswered.
  const std::string stat = "/proc/" + std::to_string(pid_) + "/stat";
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(stat);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The state follows the command name in parentheses: "pid (comm) T ...".
    const std::size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'T') return;
    std::this_thread::sleep_for(1ms);
  }
  throw std::runtime_error("redis-server " + std::to_string(pid_) + " did not stop");
}
void RedisServer::resume() {
  ::kill(pid_, SIGCONT);
}

void RedisServer::start() {
  if (pid_ >= 0) return;
  // The old socket may linger briefly; redis-server exits if it cannot bind, so retry.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    spawn();
    try {
      wait_until_ready();
      return;
    } catch (const std::exception&) {
      kill();
      if (std::chrono::steady_clock::now() > give_up) throw;
      std::this_thread::sleep_for(50ms);
    }
  }
}

Reply RedisServer::command(const std::vector<std::string>& argv) const {
  return commands({argv});
}

Reply RedisServer::commands(const std::vector<std::vector<std::string>>& argvs) const {
  ContextPtr context = connect(socket_path(), password_);
  if (!context) throw std::runtime_error("cannot connect to the test redis-server");
  ReplyPtr reply;
  for (const auto& argv : argvs) {
    reply = send(context.get(), argv);
    if (!reply) throw std::runtime_error("no reply from the test redis-server");
  }
  if (!reply) throw std::runtime_error("no command for the test redis-server");
  return std::move(detail::built_reply(reply.get()));
}

long long RedisServer::integer(const std::vector<std::string>& argv) const {
  const Reply reply = command(argv);
  if (reply.type != Reply::Type::integer) {
    throw std::runtime_error("expected an integer reply to " + argv.front() +
                             ", got: " + reply.str);
  }
  return reply.integer;
}

std::vector<std::string> RedisServer::keys() const {
  std::vector<std::string> found;
  std::string cursor = "0";
  do {
    const Reply reply = command({"SCAN", cursor, "COUNT", "1000"});
    cursor = reply.elements.at(0).str;
    for (const Reply& key : reply.elements.at(1).elements)
      found.push_back(key.str);
  } while (cursor != "0");
  return found;
}

std::vector<std::string> RedisServer::keys_without_ttl() const {
  std::vector<std::string> immortal;
  for (const std::string& key : keys()) {
    if (integer({"PTTL", key}) == -1) immortal.push_back(key);
  }
  return immortal;
}

long long RedisServer::command_calls(const std::string& name) const {
  const std::string info = command({"INFO", "commandstats"}).str;
  const std::string marker = "cmdstat_" + name + ":calls=";
  const auto at = info.find(marker);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + marker.size()));
}

}  // namespace redlimit::test
