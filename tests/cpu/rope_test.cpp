// kernels/common/rope.h and rope_params.h against transformers' own numbers
// (tests/data/rope/rope_reference.json, written by generate.py beside it):
// inverse frequencies, attention factors and cos/sin rows of every
// rope_type, over one sequence's forward passes past 2048 positions (a
// prefill of 2100 tokens, then decode steps), so that the length-dependent
// kinds (dynamic, longrope) are checked pass by pass.
#include "common/test_paths.h"
#include "kernels/common/rope.h"
#include "kernels/common/rope_params.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace llmc::hd {
namespace {

const Json &reference() {
  static const Json json = [] {
    std::string path = test::testDataPath("rope/rope_reference.json");
    auto text = readTextFile(path);
    EXPECT_TRUE(text.isOk()) << text.message();
    auto parsed = parseJson(text.isOk() ? *text : "{}", path);
    EXPECT_TRUE(parsed.isOk()) << parsed.message();
    return parsed.isOk() ? *parsed : Json::object();
  }();
  return json;
}

double number(const Json &object, const char *key, double fallback) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? fallback : it->get<double>();
}

// One case's RoPE as rope.h takes it, resolved from its config the way
// transformers does (legacy "type" included).
struct CaseRope {
  int rotaryDim = 0;
  float theta = 0;
  RopeScaling scaling;
  std::vector<float> shortFactor, longFactor;
};

CaseRope resolve(const Json &c) {
  CaseRope r;
  const Json &config = c["config"];
  const Json &s = c["rope_scaling"];
  const int headDim = config["head_dim"].get<int>();
  r.rotaryDim = ropeRotaryDim(headDim, number(config, "partial_rotary_factor", 1.0));
  r.theta = static_cast<float>(config["rope_theta"].get<double>());
  if (s.is_null())
    return r;
  std::string type = s.contains("rope_type") ? s["rope_type"] : s["type"];
  const double maxPositions = number(config, "max_position_embeddings", 2048);
  const double original = number(config, "original_max_position_embeddings",
                                 number(s, "original_max_position_embeddings", maxPositions));
  RopeScaling &out = r.scaling;
  out.factor = static_cast<float>(number(s, "factor", maxPositions / original));
  out.originalMaxPositions = static_cast<float>(original);
  if (type == "linear") {
    out.kind = RopeScalingKind::Linear;
  } else if (type == "llama3") {
    out.kind = RopeScalingKind::Llama3;
    out.lowFreqFactor = static_cast<float>(number(s, "low_freq_factor", 0));
    out.highFreqFactor = static_cast<float>(number(s, "high_freq_factor", 0));
  } else if (type == "dynamic") {
    out.kind = RopeScalingKind::Dynamic;
    out.originalMaxPositions = static_cast<float>(maxPositions);
  } else if (type == "yarn") {
    out.kind = RopeScalingKind::Yarn;
    const double factor = number(s, "factor", 0);
    out.attentionFactor = static_cast<float>(number(
        s, "attention_factor",
        ropeYarnAttentionFactor(factor, number(s, "mscale", 0), number(s, "mscale_all_dim", 0))));
    bool truncate = !s.contains("truncate") || s["truncate"].get<bool>();
    ropeYarnRamp(number(s, "beta_fast", 32), number(s, "beta_slow", 1), r.rotaryDim,
                 config["rope_theta"].get<double>(), original, truncate, out.rampLow,
                 out.rampWidth);
  } else if (type == "longrope") {
    out.kind = RopeScalingKind::LongRope;
    const double factor = number(s, "factor", maxPositions / original);
    out.attentionFactor = static_cast<float>(
        number(s, "attention_factor", ropeLongRopeAttentionFactor(factor, original)));
    for (double f : s["short_factor"])
      r.shortFactor.push_back(static_cast<float>(f));
    for (double f : s["long_factor"])
      r.longFactor.push_back(static_cast<float>(f));
    out.shortFactor = r.shortFactor.data();
    out.longFactor = r.longFactor.data();
  } else {
    ADD_FAILURE() << "unknown rope type " << type;
  }
  return r;
}

// Distance in units in the last place between two finite floats of one sign.
int64_t ulpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b) || (a < 0) != (b < 0))
    return INT64_MAX;
  return std::llabs(static_cast<int64_t>(floatBits(a)) - static_cast<int64_t>(floatBits(b)));
}

TEST(RopeReference, CoversEveryScalingKindAndSpelling) {
  const Json &ref = reference();
  ASSERT_TRUE(ref.contains("cases"));
  std::vector<std::string> names;
  for (const Json &c : ref["cases"])
    names.push_back(c["name"]);
  for (const char *want : {"default", "linear", "linear-legacy", "llama3", "yarn", "yarn-legacy",
                           "yarn-mscale", "dynamic", "dynamic-legacy", "longrope",
                           "longrope-factor", "partial-default", "partial-yarn"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST(RopeReference, InverseFrequenciesMatchTransformersPassByPass) {
  int checked = 0, exact = 0;
  for (const Json &c : reference()["cases"]) {
    const std::string name = c["name"];
    CaseRope r = resolve(c);
    ASSERT_EQ(c["inv_freq"].size(), static_cast<size_t>(r.rotaryDim / 2)) << name;
    for (const Json &pass : c["passes"]) {
      const int seqLen = pass["positions"][1].get<int>();
      for (int i = 0; i < r.rotaryDim / 2; ++i) {
        double want = pass["inv_freq"][i].get<double>();
        float got = ropeInvFreqAt(i, r.rotaryDim, r.theta, r.scaling, seqLen);
        // torch's vectorized pow (SLEEF, up to 1 ulp) and libm's correctly
        // rounded powf may differ by one ulp; never by more.
        EXPECT_LE(ulpDistance(got, static_cast<float>(want)), 1)
            << name << " seqLen " << seqLen << " pair " << i << ": " << got << " vs " << want;
        ++checked;
        exact += got == static_cast<float>(want);
      }
    }
  }
  // Nearly all are bit-exact; the ulp allowance must stay an exception.
  EXPECT_GT(exact, checked * 95 / 100) << exact << " of " << checked << " bit-exact";
  std::printf("inverse frequencies bit-exact: %d of %d\n", exact, checked);
}

TEST(RopeReference, AttentionFactorsMatchTransformers) {
  for (const Json &c : reference()["cases"]) {
    CaseRope r = resolve(c);
    EXPECT_FLOAT_EQ(r.scaling.attentionFactor, c["attention_factor"].get<float>()) << c["name"];
  }
}

TEST(RopeReference, CosSinRowsMatchTransformersPastTheOriginalContext) {
  int rowsChecked = 0;
  for (const Json &c : reference()["cases"]) {
    const std::string name = c["name"];
    CaseRope r = resolve(c);
    for (const Json &pass : c["passes"]) {
      const int seqLen = pass["positions"][1].get<int>();
      for (const auto &[key, row] : pass["rows"].items()) {
        const int position = std::stoi(key);
        double maxExcess = 0.0;
        for (int i = 0; i < r.rotaryDim / 2; ++i) {
          float invFreq = ropeInvFreqAt(i, r.rotaryDim, r.theta, r.scaling, seqLen);
          float cosA, sinA;
          ropeCosSin(position, invFreq, r.scaling.attentionFactor, cosA, sinA);
          // Where the frequency is an ulp off (see above), the angle is off
          // by position * that ulp and, once rounded, one ulp of the angle
          // more; beyond that only cosf/sinf rounding (2e-6) may differ.
          double freqError = std::fabs(invFreq - pass["inv_freq"][i].get<double>());
          float angle = ropeAngle(position, invFreq);
          double angleSlack =
              freqError == 0 ? 0.0
                             : position * freqError + (std::nextafter(angle, INFINITY) - angle);
          double allowed = (2e-6 + angleSlack) * r.scaling.attentionFactor;
          // NaN-safe: a NaN makes the comparison false and the excess infinite.
          for (double d : {std::fabs(cosA - row["cos"][i].get<double>()),
                           std::fabs(sinA - row["sin"][i].get<double>())})
            maxExcess = d - allowed <= maxExcess ? maxExcess : (std::isnan(d) ? INFINITY : d - allowed);
        }
        EXPECT_LE(maxExcess, 0.0) << name << " position " << position << " seqLen " << seqLen;
        ++rowsChecked;
      }
    }
  }
  EXPECT_GT(rowsChecked, 100);
}

TEST(RopeReference, DynamicKeepsPlainFrequenciesWithinTheContextAndGrowsPastIt) {
  RopeScaling s;
  s.kind = RopeScalingKind::Dynamic;
  s.factor = 2.0f;
  s.originalMaxPositions = 2048.0f;
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(ropeInvFreqAt(i, 64, 10000.0f, s, 2048), ropeDefaultInvFreq(i, 64, 10000.0f));
    if (i > 0)
      EXPECT_LT(ropeInvFreqAt(i, 64, 10000.0f, s, 2049), ropeDefaultInvFreq(i, 64, 10000.0f));
  }
  EXPECT_TRUE(ropeDependsOnLength(RopeScalingKind::Dynamic));
  EXPECT_TRUE(ropeDependsOnLength(RopeScalingKind::LongRope));
  EXPECT_FALSE(ropeDependsOnLength(RopeScalingKind::Yarn));
}

TEST(RopeReference, LongRopeSwitchesFactorsOnlyPastTheOriginalLength) {
  std::vector<float> shortFactor(4, 1.0f), longFactor(4, 4.0f);
  RopeScaling s;
  s.kind = RopeScalingKind::LongRope;
  s.originalMaxPositions = 2048.0f;
  s.shortFactor = shortFactor.data();
  s.longFactor = longFactor.data();
  float plain = ropeDefaultInvFreq(1, 8, 10000.0f);
  EXPECT_EQ(ropeInvFreqAt(1, 8, 10000.0f, s, 2048), plain);
  EXPECT_FLOAT_EQ(ropeInvFreqAt(1, 8, 10000.0f, s, 2049), plain / 4.0f);
}

TEST(RopePairs, RotateHalfAndInterleavedPickTheirFeatures) {
  int a, b;
  ropePairFeatures(3, 16, /*interleaved=*/false, a, b);
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 11);
  ropePairFeatures(3, 16, /*interleaved=*/true, a, b);
  EXPECT_EQ(a, 6);
  EXPECT_EQ(b, 7);
  EXPECT_EQ(ropeRotaryDim(80, 0.4), 32); // Phi-2
  EXPECT_EQ(ropeRotaryDim(64, 0.25), 16); // StableLM
}

} // namespace
} // namespace llmc::hd
