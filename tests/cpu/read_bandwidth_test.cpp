// The read-bandwidth probe (cpu/read_bandwidth.h) runs on every ISA and
// thread count and reports a positive, finite figure; bad sizes are errors
// that name the minimum. No timing is asserted: the figure depends on the
// machine and its load.
#include "cpu/read_bandwidth.h"
#include "test_util.h"

#include <cmath>

namespace llmc::cpu {
namespace {

TEST(ReadBandwidth, ReportsAPositiveFigureOnEveryIsaAndThreadCount) {
  ReadBandwidthOptions options;
  options.bytes = size_t(48) << 20; // above the 32 MiB L3 of the CI's Zen 3, and quick
  options.trials = 2;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      Expected<double> gbs = measureReadBandwidth(pool, options);
      ASSERT_TRUE(gbs.isOk()) << gbs.message();
      EXPECT_TRUE(std::isfinite(*gbs) && *gbs > 0.0)
          << isaName(isa) << " " << threads << " threads: " << *gbs;
    }
  }
}

// A buffer that is not a whole number of lines per stream is read up to the
// last whole line of each stream.
TEST(ReadBandwidth, OddSizesAreReadInWholeLines) {
  ThreadPool pool(2);
  ReadBandwidthOptions options;
  options.bytes = 2 * 4 * 64 + 63; // one line per stream and thread, and a partial one
  options.trials = 1;
  Expected<double> gbs = measureReadBandwidth(pool, options);
  ASSERT_TRUE(gbs.isOk()) << gbs.message();
  EXPECT_GT(*gbs, 0.0);
}

TEST(ReadBandwidth, TooSmallABufferOrNoTrialsIsAnError) {
  ThreadPool pool(2);
  ReadBandwidthOptions options;
  options.bytes = 511; // 2 threads x 4 streams x 64 bytes = 512 at least
  Expected<double> gbs = measureReadBandwidth(pool, options);
  ASSERT_FALSE(gbs.isOk());
  EXPECT_EQ(gbs.message(), "read bandwidth probe: buffer of 511 bytes is below one 64-byte line "
                           "per stream (4 per thread, 2 threads): give at least 512 bytes");
  options.bytes = 4096;
  options.trials = 0;
  gbs = measureReadBandwidth(pool, options);
  ASSERT_FALSE(gbs.isOk());
  EXPECT_EQ(gbs.message(), "read bandwidth probe: trials is 0, must be at least 1");
}

// A kept probe measures again and again from the one buffer it filled, and
// says how much it holds (llmrun bench --paired-bandwidth subtracts it from
// the peak RSS it reports).
TEST(ReadBandwidth, AKeptProbeMeasuresRepeatedlyFromOneBuffer) {
  ThreadPool pool(2);
  ReadBandwidthOptions options;
  options.bytes = size_t(48) << 20;
  options.trials = 1;
  Expected<ReadBandwidthProbe> probe = ReadBandwidthProbe::create(pool, options);
  ASSERT_TRUE(probe.isOk()) << probe.message();
  EXPECT_GE(probe->allocatedBytes(), options.bytes - 2 * 4 * 64 * 8); // whole lines per piece
  EXPECT_LE(probe->allocatedBytes(), options.bytes + 4096);
  for (int i = 0; i < 3; ++i) {
    Expected<double> gbs = probe->measure(pool);
    ASSERT_TRUE(gbs.isOk()) << gbs.message();
    EXPECT_TRUE(std::isfinite(*gbs) && *gbs > 0.0) << i << ": " << *gbs;
  }
  options.bytes = 511;
  probe = ReadBandwidthProbe::create(pool, options);
  ASSERT_FALSE(probe.isOk());
  EXPECT_NE(probe.message().find("give at least 512 bytes"), std::string::npos) << probe.message();
}

} // namespace
} // namespace llmc::cpu
