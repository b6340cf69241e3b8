// redlimit: the command for operating redlimit's limits in Redis. It stores and shows the
// policies limiters follow (policy, override), shows and resets a key's state (inspect, reset),
// finds the keys nearest their limits (top), and shows the fleet's decisions per second
// (watch). Exit status: 0 ok, 1 not found or denied, 2 usage, 3 Redis unavailable, 4 another
// error (docs/operations.md, "The redlimit command").
//
// usage: redlimit [--url URL] [--prefix P] [--json] <command> ...   (redlimit --help)
#include <CLI/CLI.hpp>

#include "command_line.hpp"
#include "command_runner.hpp"
#include "exit_status.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Operate redlimit's rate limits in Redis: policies, keys, and live rates"};
  redlimit_cli::Invocation invocation;
  redlimit_cli::add_commands(app, invocation);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Why not CLI11's own status: scripts get the documented one, 2 for every usage error.
    return app.exit(e) == 0 ? redlimit_cli::exit_ok : redlimit_cli::exit_usage;
  }
  return redlimit_cli::run_command(invocation.global, std::move(invocation.body));
}
