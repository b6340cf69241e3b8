#include "runtime/uv_handles.hpp"

#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

int init(uv_loop_t* loop, uv_timer_t* timer) {
  return uv_timer_init(loop, timer);
}
int init(uv_loop_t* loop, uv_idle_t* idle) {
  return uv_idle_init(loop, idle);
}

}  // namespace

template <class UvType>
OwnedHandle<UvType>::OwnedHandle(uv_loop_t* loop, Callback on_event, void* context,
                                 CloseLatch* latch) {
  auto* handle = new Handle{{}, on_event, context, latch};
  if (const int rc = init(loop, &handle->uv); rc != 0) {
    delete handle;
    throw Error(std::string("uv handle init failed: ") + uv_strerror(rc));
  }
  handle->uv.data = handle;
  handle_ = handle;
  if (latch != nullptr) latch->opened();
}

template class OwnedHandle<uv_timer_t>;
template class OwnedHandle<uv_idle_t>;

}  // namespace redlimit::detail
