// Backend::run() as a specification: operations are values, each run to its own result, several
// in one call, and one that fails does not keep the others from theirs.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "limiter/local_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit::detail {
namespace {

constexpr std::int64_t t0 = 1'800'000'000'000'000;  // a microsecond timestamp in 2027

class BackendRun : public test::LoopTest {
 protected:
  DecideRequest request(std::string_view key, std::int64_t permits = 1) const {
    return DecideRequest(policy_, KeyBase(key), Operation::acquire, permits, t0);
  }

  std::shared_ptr<const CompiledPolicy> policy_ =
      CompiledPolicy::compile(Policy::of(Limit::gcra("2/s", 2)));
  LocalBackend backend_;
};

TEST_F(BackendRun, EachOperationOfSeveralGetsItsOwnResult) {
  const DecideRequest first = request("a", 2);
  const DecideRequest second = request("b");
  std::vector<BackendOp> ops;
  ops.emplace_back(DecideOp{first});
  ops.emplace_back(DecideOp{second});
  ops.emplace_back(ReserveOp{request("a"), 2'000'000});
  run(loop(), backend_.run(ops));

  EXPECT_TRUE(std::get<DecideOp>(ops[0]).result.allowed);
  EXPECT_EQ(std::get<DecideOp>(ops[0]).result.remaining, 0);
  EXPECT_TRUE(std::get<DecideOp>(ops[1]).result.allowed);
  EXPECT_EQ(std::get<DecideOp>(ops[1]).result.remaining, 1);
  // Key "a" is empty after the first: its reservation waits for the next permit, 0.5 s on.
  const Reservation& reserved = std::get<ReserveOp>(ops[2]).result;
  EXPECT_TRUE(reserved.decision.allowed);
  EXPECT_EQ(reserved.wait_us, 500'000);
}

TEST_F(BackendRun, OneOperationThatFailsLetsTheOthersRunAndIsThrownAfterThem) {
  // Key "a" written under version 2 of a stored policy, then asked under version 1: refused as
  // stale.
  const auto version = [](std::int64_t v) {
    return CompiledPolicy::compile(Policy::of(Limit::gcra("2/s", 2)),
                                   PolicyEpoch{.version = v, .since_us = t0 - 10 + v});
  };
  const DecideRequest newer(version(2), KeyBase("a"), Operation::acquire, 1, t0);
  const DecideRequest older(version(1), KeyBase("a"), Operation::acquire, 1, t0);
  const DecideRequest other = request("b");
  std::vector<BackendOp> ops;
  ops.emplace_back(DecideOp{newer});
  ops.emplace_back(DecideOp{older});
  ops.emplace_back(DecideOp{other});

  EXPECT_THROW(run(loop(), backend_.run(ops)), StalePolicy);
  EXPECT_TRUE(std::get<DecideOp>(ops[0]).result.allowed);
  EXPECT_TRUE(std::get<DecideOp>(ops[2]).result.allowed);
  EXPECT_EQ(std::get<DecideOp>(ops[2]).result.remaining, 1);
}

}  // namespace
}  // namespace redlimit::detail
