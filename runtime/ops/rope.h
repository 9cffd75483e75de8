// RoPE as the steps carry it (engine.fbs RopeParams): the one conversion
// from the plan's fields to the shared kernels' terms (kernels/common/rope.h),
// and the distinct configurations of a program, so that a backend builds one
// cos/sin table per configuration (partial rotary, per-layer theta and
// scaling are then just more configurations).
#pragma once

#include "kernels/common/rope.h"
#include "schema/engine_generated.h"

#include <cstdint>
#include <vector>

namespace llmc::ops {

// A RopeParams in the kernels' terms. Equal configurations share a table.
struct RopeConfig {
  float theta = 10000.0f;
  int rotaryDim = 0;
  bool interleaved = false;
  hd::RopeScaling scaling;

  bool operator==(const RopeConfig &o) const;
};

RopeConfig ropeConfig(const fb::RopeParams &rope);
// The same from the object API (the CUDA code generator's view of a step).
RopeConfig ropeConfig(const fb::RopeParamsT &rope);

// A step's RoPE: a Rope step's, an Attention step's (null when it rotates
// nothing), null for the other kinds.
const fb::RopeParams *stepRope(const fb::Step &step);

// The distinct RoPE configurations of a program's steps, and for each step
// the index of its configuration (-1: none).
struct ProgramRopes {
  std::vector<RopeConfig> configs;
  std::vector<int> stepConfig; // [steps]
};
ProgramRopes programRopes(const fb::Program &program);

} // namespace llmc::ops
