#include "table.hpp"

#include <algorithm>

namespace redlimit_cli {
namespace {

void append_line(std::string& out, const std::vector<Column>& columns,
                 const std::vector<std::size_t>& widths, const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string& cell = i < cells.size() ? cells[i] : std::string();
    const std::string padding(widths[i] - cell.size(), ' ');
    if (i > 0) line += "  ";
    line += columns[i].right_aligned ? padding + cell : cell + padding;
  }
  line.erase(line.find_last_not_of(' ') + 1);
  out += line;
  out += '\n';
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths;
  std::vector<std::string> titles;
  for (const Column& column : columns_) {
    widths.push_back(column.title.size());
    titles.push_back(column.title);
  }
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  append_line(out, columns_, widths, titles);
  for (const auto& row : rows_)
    append_line(out, columns_, widths, row);
  return out;
}

std::string render_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t width = 0;
  for (const auto& [label, value] : fields)
    width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, value] : fields) {
    std::string line = label + std::string(width - label.size() + 2, ' ') + value;
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace redlimit_cli
