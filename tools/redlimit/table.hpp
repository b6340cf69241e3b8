#pragma once
// Aligned text tables, the default output of the commands.

#include <string>
#include <vector>

namespace redlimit_cli {

/// One column of a Table: its title and how its cells line up.
struct Column {
  std::string title;
  bool right_aligned = false;  ///< numbers
};

/// Rows of cells under column titles, each column as wide as its widest cell, two spaces apart.
/// Widths count bytes: pass cells through printable() first.
class Table {
 public:
  explicit Table(std::vector<Column> columns);
  /// A row of one cell per column (missing cells are empty).
  void add_row(std::vector<std::string> cells);
  /// The titles, then the rows, each line ending in '\n', without trailing spaces.
  std::string render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

/// "label  value" lines with the values aligned, as for one record: {{"policy", "gcra 10/1s"}}.
std::string render_fields(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace redlimit_cli
