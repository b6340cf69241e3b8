#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

template <class UvType>
OwnedHandle<UvType>::OwnedHandle(uv_loop_t* loop, Callback on_event, void* context,
                                 CloseLatch* latch)
    : on_event_(on_event), context_(context) {
  if constexpr (std::is_same_v<UvType, uv_timer_t>) {
    handle_.init(loop, &uv_timer_init);
  } else {
    handle_.init(loop, &uv_idle_init);
  }
  handle_.get()->data = this;
  if (latch != nullptr) {
    latch->opened();
    handle_.when_closed([](void* closed) noexcept { static_cast<CloseLatch*>(closed)->closed(); },
                        latch);
  }
}

template class OwnedHandle<uv_timer_t>;
template class OwnedHandle<uv_idle_t>;

}  // namespace redlimit::detail
