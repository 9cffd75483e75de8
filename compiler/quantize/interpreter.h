// Runs a model's @forward (the `llm` IR before fusion) on the CPU backend's
// kernels, one sequence at a time, reading weights from a WeightTable in
// place. The quantizer's calibration uses it to see the activations entering
// every linear layer; tests use it to compare functions.
#pragma once

#include "quantize/weight_table.h"
#include "support/status.h"
#include "support/thread_pool.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc::quant {

class ForwardInterpreter {
public:
  // Called for each value an op produces: [rows, width] f32, row-major,
  // valid during the call only.
  using Observer =
      std::function<void(mlir::Value value, const float *data, int64_t rows, int64_t width)>;

  // Checks that every op of `forward` runs here (embedding, rms_norm,
  // linear with float weights, rope, attention, add, mul, silu, logits) and
  // that every weight is in `weights`; sizes a KV cache for `maxTokens`.
  static Expected<std::unique_ptr<ForwardInterpreter>> create(mlir::func::FuncOp forward,
                                                              const WeightTable &weights,
                                                              ThreadPool &pool, int64_t maxTokens);
  ~ForwardInterpreter();

  // Runs `tokens` at positions 0 .. T-1 of a fresh sequence (T <= maxTokens)
  // and returns the logits [T, V].
  Expected<std::vector<float>> run(const std::vector<int32_t> &tokens,
                                   const Observer &observe = nullptr);

  // Float [N, K] matrices used instead of the named weights.
  using WeightOverrides = std::map<std::string, cpu::WeightMatrix>;

  // Runs only the ops between `input` and `target`: `input` holds x [rows,
  // width], rows being fresh sequences of the given lengths one after the
  // other (positions restart at 0 in each; sum of lengths <= maxTokens).
  // Every op on the way must read only values computed from `input`, weights
  // and the positions. Returns target [rows, width]. AWQ measures a group's
  // block output with it (the attention or MLP after q/k/v or gate/up).
  Expected<std::vector<float>> runSlice(mlir::Value input, const float *x, int64_t rows,
                                        const std::vector<int64_t> &sequenceLengths,
                                        mlir::Value target, const WeightOverrides &overrides = {});

private:
  struct State;
  explicit ForwardInterpreter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace llmc::quant
