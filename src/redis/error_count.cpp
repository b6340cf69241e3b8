#include "redis/error_count.hpp"

#include <cstddef>

#include "metrics/instruments.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

std::optional<RedisError> redis_error_of(const std::exception_ptr& error) noexcept {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const CircuitOpen&) {
    return RedisError::circuit_open;
  } catch (const TimeoutError&) {
    return RedisError::timeout;
  } catch (const Overloaded&) {
    return RedisError::overloaded;
  } catch (const Unavailable&) {  // ConnectionError
    return RedisError::connection;
  } catch (const ReplyError&) {
    return RedisError::reply;
  } catch (const ConfigError&) {  // an error reply for lack of permission, a refused AUTH
    return RedisError::reply;
  } catch (const ProtocolError&) {
    return RedisError::protocol;
  } catch (...) {
    return std::nullopt;
  }
}

void count_redis_error(RedisMetrics& metrics, const std::exception_ptr& error) noexcept {
  if (const std::optional<RedisError> kind = redis_error_of(error)) {
    metrics.errors[static_cast<std::size_t>(*kind)].add();
  }
}

}  // namespace redlimit::detail
