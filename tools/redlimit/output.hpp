#pragma once
// Where the commands write: results on stdout, problems on stderr.

#include <string_view>

#include "json_writer.hpp"

namespace redlimit_cli {

/// Writes `text` to stdout as it is, and flushes it (a reader of a pipe sees each refresh);
/// throws std::runtime_error when it cannot (a full disk, a closed pipe): the command fails.
void print_out(std::string_view text);
/// Writes `json`'s document to stdout as one line.
void print_json(const JsonWriter& json);
/// Writes "redlimit: <message>" and a newline to stderr.
void print_error(std::string_view message);

}  // namespace redlimit_cli
