// The model AWQ and GPTQ calibrate on: a model's @forward (the `llm` IR
// before fusion) lowered at -O0 (codegen/lower_to_plan.h, what `llmc build
// -O0 --target cpu` lowers) to an in-memory plan whose float weights are the
// WeightTable's bytes in place, run by the CPU executor through its hooks
// (runtime/cpu/backend/cpu_executor.h: observer, step range, weight
// overrides). One executor computes what the plans compute: every op kind
// and family the CPU backend runs, calibration runs too. It keeps the map
// from the IR's values (the LinearGroups of passes/Quantize.h name them) to
// the plan's steps and buffers.
#pragma once

#include "cpu/weights.h"
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

class CalibrationModel {
public:
  // Called for each value an op produces: [rows, width] f32, row-major,
  // valid during the call only.
  using Observer =
      std::function<void(mlir::Value value, const float *data, int64_t rows, int64_t width)>;

  // Lowers `forward` (its module must hold it as @forward) with the weights
  // of `weights`, which must outlive the model; sizes a KV cache for
  // `maxTokens` rows in up to 64 sequences. Fails, naming the op, when the
  // lowering or the plan's validation refuses it.
  static Expected<std::unique_ptr<CalibrationModel>> create(mlir::func::FuncOp forward,
                                                            const WeightTable &weights,
                                                            ThreadPool &pool, int64_t maxTokens);
  ~CalibrationModel();

  // Runs `tokens` at positions 0 .. T-1 of a fresh sequence (T <= maxTokens)
  // and returns the logits [T, V].
  Expected<std::vector<float>> run(const std::vector<int32_t> &tokens,
                                   const Observer &observe = nullptr);

  // Runs `tokens` as run() does, but only as far as the steps that read
  // `values` (calibration's group inputs), reporting each of them once: no
  // LM head, no layers after the last value's reader.
  Status observe(const std::vector<int32_t> &tokens, const std::vector<mlir::Value> &values,
                 const Observer &observe);

  // Float [N, K] matrices used instead of the named weights.
  using WeightOverrides = std::map<std::string, cpu::WeightMatrix>;

  // Runs only the ops between `input` and `target`: `input` holds x [rows,
  // width], rows being fresh sequences of the given lengths one after the
  // other (positions restart at 0 in each; sum of lengths = rows <=
  // maxTokens). Every op on the way that reads a value computed from `input`
  // must read only such values, weights and the positions. Returns target
  // [rows, width]. AWQ measures a group's block output with it (the
  // attention or MLP after q/k/v or gate/up).
  Expected<std::vector<float>> runSlice(mlir::Value input, const float *x, int64_t rows,
                                        const std::vector<int64_t> &sequenceLengths,
                                        mlir::Value target, const WeightOverrides &overrides = {});

  // A place where the program can be cut: the steps from `step` on read
  // nothing the earlier steps computed but `value` (and weights and the
  // positions). In a decoder these are the residual stream between layers
  // and between a layer's attention and MLP halves.
  struct Cut {
    int64_t step = 0;
    mlir::Value value;
  };
  // Every cut, in program order (each value's buffer is F32).
  std::vector<Cut> cuts() const;
  // The step an op of @forward runs as; -1 for the weights and the return.
  int64_t stepOf(mlir::Operation *op) const;

  // A range of steps [firstStep, endStep) between two cuts (or from the
  // start: `input` empty, the range reads the tokens).
  struct Segment {
    int64_t firstStep = 0, endStep = 0;
    mlir::Value input;  // the cut the range starts at; empty: step 0, the tokens
    mlir::Value output; // the value the next range reads; empty: none
  };
  // The names of the weights the segment's steps read.
  std::vector<std::string> weightsOf(const Segment &segment) const;

  // Runs one window through `segment`: `tokens` at positions 0 .. T-1 of a
  // fresh sequence, and when the segment starts at a cut `inputRows` [T,
  // width] as that cut's value (the rows the previous segment returned).
  // Reports each of `values` whose first reader is in the segment, as
  // observe() does, and returns the segment's output [T, width] (empty when
  // it has none). `overrides` as for runSlice.
  Expected<std::vector<float>> runSegment(const Segment &segment,
                                          const std::vector<int32_t> &tokens,
                                          const float *inputRows,
                                          const std::vector<mlir::Value> &values,
                                          const Observer &observe,
                                          const WeightOverrides &overrides = {});

  // Steps of the lowered program (tests).
  int64_t numSteps() const;

private:
  struct State;
  explicit CalibrationModel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace llmc::quant
