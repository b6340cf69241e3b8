#include "limiter/unavailability.hpp"

#include "redlimit/errors.hpp"

namespace redlimit::detail {

bool is_unavailability(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Unavailable&) {
    return true;
  } catch (const ReplyError& e) {
    static const char* const transient[] = {"BUSY",        "LOADING",  "MASTERDOWN", "TRYAGAIN",
                                            "CLUSTERDOWN", "READONLY", "NOREPLICAS", "OOM"};
    for (const char* code : transient) {
      if (e.code() == code) return true;
    }
    return false;
  } catch (...) {
    return false;
  }
}

}  // namespace redlimit::detail
