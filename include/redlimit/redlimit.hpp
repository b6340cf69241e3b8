#pragma once
/// @file redlimit.hpp
/// The umbrella header: everything an application of redlimit needs.

#include "redlimit/callback.hpp"
#include "redlimit/client.hpp"
#include "redlimit/decision_event.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/fleet_counts.hpp"
#include "redlimit/http_listener.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/metrics_endpoint.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/ratelimit_fields.hpp"
#include "redlimit/redis_keys.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "redlimit/task.hpp"
#include "redlimit/task_group.hpp"
#include "redlimit/version.hpp"
