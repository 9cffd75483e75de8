// serving::ServingLoop: submissions from several threads, events on the
// loop thread, cancel, the waiting-queue bound, shutdown (drain and abort).
#include "serving/serving_loop.h"
#include "serving_fixture.h"

#include <atomic>
#include <chrono>
#include <future>

namespace llmc {
namespace {

using namespace serving;
using Clock = std::chrono::steady_clock;

struct Collected {
  std::mutex mutex;
  std::condition_variable done;
  std::map<RequestId, test::Outcome> out;
  int finished = 0;
  std::thread::id thread;

  EventCallback callback() {
    return [this](const TokenEvent &e) {
      std::lock_guard<std::mutex> lock(mutex);
      thread = std::this_thread::get_id();
      test::Outcome &o = out[e.id];
      if (e.token >= 0)
        o.tokens.push_back(e.token);
      if (e.finished) {
        o.reason = e.reason;
        o.error = e.error;
        ++finished;
        done.notify_all();
      }
    };
  }
  bool waitFor(int count, double seconds = 60) {
    std::unique_lock<std::mutex> lock(mutex);
    return done.wait_for(lock, std::chrono::duration<double>(seconds),
                         [&] { return finished >= count; });
  }
};

std::unique_ptr<ServingLoop> startLoop(Engine &engine, ServingConfig config = {}) {
  auto loop = ServingLoop::start(engine, config);
  EXPECT_TRUE(loop.isOk()) << loop.message();
  return loop.isOk() ? std::move(*loop) : nullptr;
}

TEST(ServingLoop, ConcurrentSubmissionsEachGetTheirSoloOutput) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(20);
  std::vector<RequestParams> requests;
  for (int i = 0; i < 24; ++i)
    requests.push_back(i % 2 ? test::seeded(test::randomPrompt(rng, 6 + i), 10, i)
                             : test::greedy(test::randomPrompt(rng, 6 + i), 10));
  std::vector<test::Outcome> expected;
  for (const auto &r : requests)
    expected.push_back(test::solo(*engine, r));
  auto loop = startLoop(*engine);
  Collected c;
  std::vector<RequestId> ids(requests.size());
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += 4) {
        SubmitResult r = loop->submit(requests[i], c.callback());
        ASSERT_EQ(r.status, SubmitStatus::Accepted) << r.message;
        ids[i] = r.id;
      }
    });
  for (auto &t : clients)
    t.join();
  ASSERT_TRUE(c.waitFor(24));
  std::lock_guard<std::mutex> lock(c.mutex);
  EXPECT_NE(c.thread, std::this_thread::get_id());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(c.out[ids[i]].tokens, expected[i].tokens) << i;
    EXPECT_EQ(c.out[ids[i]].reason, FinishReason::Length);
  }
  SchedulerStats m = loop->metrics();
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
  EXPECT_EQ(m.generationTokens, 240);
  EXPECT_EQ(m.kvUsage, 0.0);
}

TEST(ServingLoop, BadRequestsQueueFullCancelAndShutdown) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  ServingConfig config;
  config.maxWaiting = 2;
  config.scheduler.maxNumSeqs = 1;
  auto loop = startLoop(*engine, config);
  Collected c;
  SubmitResult bad = loop->submit(test::greedy({}, 4), c.callback());
  EXPECT_EQ(bad.status, SubmitStatus::InvalidRequest);
  EXPECT_NE(bad.message.find("prompt is empty"), std::string::npos);
  // One long request runs; the queue of 2 fills behind it.
  SubmitResult running = loop->submit(test::greedy({1, 2, 3}, 400), c.callback());
  ASSERT_EQ(running.status, SubmitStatus::Accepted);
  for (int i = 0; i < 2000 && loop->metrics().running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(loop->metrics().running, 1);
  SubmitResult w1, w2, full;
  {
    // Holding the callbacks' mutex stalls the loop at its next token event,
    // so the running request cannot finish (400 tokens take ~40 ms) while the
    // queue fills and the cancels go in, however this thread is scheduled.
    std::lock_guard<std::mutex> stall(c.mutex);
    w1 = loop->submit(test::greedy({1, 4}, 400), c.callback());
    w2 = loop->submit(test::greedy({1, 5}, 400), c.callback());
    full = loop->submit(test::greedy({1, 6}, 4), c.callback());
    loop->cancel(w1.id);
    loop->cancel(running.id);
  }
  ASSERT_EQ(w1.status, SubmitStatus::Accepted);
  ASSERT_EQ(w2.status, SubmitStatus::Accepted);
  EXPECT_EQ(full.status, SubmitStatus::QueueFull) << full.message;
  ASSERT_TRUE(c.waitFor(2, 10));
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    EXPECT_EQ(c.out[w1.id].reason, FinishReason::Abort);
    EXPECT_EQ(c.out[running.id].reason, FinishReason::Abort);
  }
  auto start = Clock::now();
  loop->shutdown(ShutdownMode::Abort);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
  ASSERT_TRUE(c.waitFor(3, 1));
  EXPECT_EQ(c.out[w2.id].reason, FinishReason::Abort);
  EXPECT_EQ(loop->submit(test::greedy({1}, 2), c.callback()).status, SubmitStatus::ShuttingDown);
  loop->shutdown(ShutdownMode::Drain); // idempotent
  EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
}

TEST(ServingLoop, DrainFinishesInFlightRequestsThenAbortsAfterTheDeadline) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  ServingConfig config;
  config.drainSeconds = 0.5;
  config.scheduler.maxNumSeqs = 1;
  auto loop = startLoop(*engine, config);
  Collected c;
  SubmitResult quick = loop->submit(test::greedy({1, 2}, 3), c.callback());
  ASSERT_EQ(quick.status, SubmitStatus::Accepted);
  ASSERT_TRUE(c.waitFor(1));
  // One at a time, 20 x 500 tokens cannot finish within the 0.5 s drain:
  // each token event takes a millisecond, however fast the machine steps.
  EventCallback collect = c.callback();
  EventCallback slowly = [&collect](const TokenEvent &e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    collect(e);
  };
  std::vector<RequestId> slow;
  for (int i = 0; i < 20; ++i)
    slow.push_back(loop->submit(test::greedy({1, 3, static_cast<int32_t>(i + 4)}, 500), slowly).id);
  SubmitResult small = loop->submit(test::greedy({1, 7}, 2), c.callback());
  auto start = Clock::now();
  loop->shutdown(ShutdownMode::Drain);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 4.0);
  EXPECT_GE(took, 0.4);
  ASSERT_TRUE(c.waitFor(22, 1));
  std::lock_guard<std::mutex> lock(c.mutex);
  EXPECT_EQ(c.out[quick.id].reason, FinishReason::Length);
  EXPECT_EQ(c.out[slow.back()].reason, FinishReason::Abort); // never admitted in time
  EXPECT_EQ(c.out[small.id].reason, FinishReason::Abort);
  EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
}

} // namespace
} // namespace llmc
