#pragma once

#include <string>
#include <string_view>

namespace redlimit::detail {

/// Appends `value` to `out` as the inside of a quoted label value of the Prometheus text format:
/// backslash, double quote and line feed escaped (`\\`, `\"`, `\n`); every byte that is not part
/// of a valid UTF-8 sequence replaced by U+FFFD.
// Why replaced: Prometheus rejects a whole scrape whose text holds a label value that is not
// UTF-8, and a limiter's name may be any bytes.
void append_label_value(std::string& out, std::string_view value);

}  // namespace redlimit::detail
