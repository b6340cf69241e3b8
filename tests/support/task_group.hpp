#pragma once

#include "redlimit/task_group.hpp"

namespace redlimit::test {
using redlimit::TaskGroup;
}  // namespace redlimit::test
