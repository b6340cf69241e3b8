#include "runtime/uv_handle.hpp"

namespace redlimit::detail {

void throw_init_failed(uv_handle_type type, int code) {
  throw UvError(std::string("cannot make a uv ") + uv_handle_type_name(type) +
                    " handle: " + uv_strerror(code),
                code);
}

}  // namespace redlimit::detail
