#include "job_producer.hpp"

JobProducer::JobProducer(uv_loop_t* loop, std::chrono::milliseconds every, int count, int tenants,
                         std::function<void(Job)> submit)
    : timer_(new uv_timer_t),
      every_(every),
      count_(count),
      tenants_(tenants),
      submit_(std::move(submit)) {
  uv_timer_init(loop, timer_);
  timer_->data = this;
}

JobProducer::~JobProducer() {
  uv_close(reinterpret_cast<uv_handle_t*>(timer_),
           [](uv_handle_t* handle) { delete reinterpret_cast<uv_timer_t*>(handle); });
}

void JobProducer::start() {
  const auto every = static_cast<std::uint64_t>(every_.count());
  uv_timer_start(timer_, &JobProducer::on_tick, 0, every);
}

void JobProducer::on_tick(uv_timer_t* timer) {
  auto* self = static_cast<JobProducer*>(timer->data);
  const int id = self->produced_++;
  if (self->produced_ >= self->count_) uv_timer_stop(timer);
  self->submit_(Job{id, "tenant-" + std::to_string(id % self->tenants_)});
}
