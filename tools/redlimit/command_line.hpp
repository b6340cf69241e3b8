#pragma once
// The command line of `redlimit`: its subcommands, their arguments, and the command each one
// runs.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "redlimit/limit.hpp"

namespace redlimit_cli {

/// The arguments of the subcommands, as parsed.
struct CommandArguments {
  std::string name;
  std::string key;
  std::string policy;
  redlimit::Carry carry = redlimit::Carry::as_is;
  std::size_t count = 10;
  std::size_t sample = 1000;
  std::size_t scan_limit = 100'000;
  std::vector<std::string> names;
  std::string interval = "1s";
  bool once = false;
};

/// What the command line asked for.
struct Invocation {
  GlobalOptions global;
  CommandArguments args;
  /// The chosen subcommand's work; set when parsing succeeds.
  CommandBody body;
};

/// Adds the global options and every subcommand to `app`; a successful app.parse() then fills
/// `invocation`, which must outlive the parse.
void add_commands(CLI::App& app, Invocation& invocation);

}  // namespace redlimit_cli
