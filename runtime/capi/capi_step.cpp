// The C API's batch step with per-row outputs (engine/step.h: Argmax, TopK,
// Logits) and the sampler's side of it: which kind a sampler can draw from,
// and drawing from a row of any kind.
#include "capi_internal.h"

#include "engine/step.h"

#include <cmath>
#include <vector>

using namespace llmc;
using namespace llmc::capi;

namespace {

bool greedyWithoutPenalty(const sampling::SamplingParams &p) {
  return p.temperature == 0.0f && p.repetitionPenalty == 1.0f && p.frequencyPenalty == 0.0f &&
         p.presencePenalty == 0.0f;
}

Expected<OutputKind> toOutputKind(llmc_output_kind kind, size_t entry) {
  switch (kind) {
  case LLMC_OUTPUT_ARGMAX:
    return OutputKind::Argmax;
  case LLMC_OUTPUT_TOP_K:
    return OutputKind::TopK;
  case LLMC_OUTPUT_LOGITS:
    return OutputKind::Logits;
  }
  return Status::error("request " + std::to_string(entry) + " has output kind " +
                       std::to_string(static_cast<int>(kind)) +
                       ", not one of LLMC_OUTPUT_ARGMAX, _TOP_K, _LOGITS");
}

// Row r of the engine's output as the C struct.
llmc_step_row toRow(const StepOutput &out, size_t r, llmc_output_kind kind) {
  llmc_step_row row{};
  row.kind = kind;
  row.token = -1;
  row.logits = out.logitsOf(r);
  if (kind == LLMC_OUTPUT_ARGMAX) {
    row.token = out.ids[r];
  } else if (kind == LLMC_OUTPUT_TOP_K) {
    row.num_candidates = out.counts[r];
    if (out.counts[r] <= hd::kTopKCapacity) {
      row.scores = out.scoresOf(r);
      row.candidates = out.candidatesOf(r);
    }
  }
  return row;
}

} // namespace

extern "C" {

llmc_status llmc_step_outputs(llmc_engine *handle, const llmc_step_request *requests,
                              size_t numRequests, llmc_step_row *rows, size_t capacity) {
  const char *fn = "llmc_step_outputs";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (llmc_status s = refuseWhenScheduled(fn, *handle); s)
      return s;
    if (requests == nullptr || numRequests == 0)
      return fail(LLMC_STATUS_INVALID_ARGUMENT, std::string(fn) + ": no requests to step");
    if (rows == nullptr)
      return nullArgument(fn, "rows");
    if (capacity < numRequests)
      return fail(LLMC_STATUS_BUFFER_TOO_SMALL,
                  std::string(fn) + ": " + std::to_string(numRequests) +
                      " requests need as many rows, more than the capacity " +
                      std::to_string(capacity));
    std::vector<SequenceTokens> batch(numRequests);
    std::vector<OutputRequest> outputs(numRequests);
    int64_t row = 0;
    for (size_t i = 0; i < numRequests; ++i) {
      const llmc_step_request &q = requests[i];
      if (q.tokens == nullptr || q.num_tokens == 0)
        return fail(LLMC_STATUS_INVALID_ARGUMENT,
                    std::string(fn) + ": request " + std::to_string(i) + " has no tokens");
      auto kind = toOutputKind(q.output, i);
      if (!kind)
        return fromStatus(kind.status().withContext(fn), LLMC_STATUS_INVALID_ARGUMENT);
      batch[i].sequence = q.sequence;
      batch[i].tokens.assign(q.tokens, q.tokens + q.num_tokens);
      row += static_cast<int64_t>(q.num_tokens);
      outputs[i].row = row - 1;
      outputs[i].kind = *kind;
      outputs[i].k = q.top_k;
      outputs[i].temperature = q.temperature;
    }
    auto out = handle->engine->run(batch, outputs);
    if (!out)
      return stepFailure(out.status());
    for (size_t i = 0; i < numRequests; ++i)
      rows[i] = toRow(**out, i, requests[i].output);
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_sampler_output_kind(const llmc_sampler *sampler, size_t vocabSize,
                                     llmc_step_request *request) {
  const char *fn = "llmc_sampler_output_kind";
  return guarded(fn, [&]() -> llmc_status {
    if (sampler == nullptr)
      return nullArgument(fn, "sampler");
    if (request == nullptr)
      return nullArgument(fn, "request");
    if (vocabSize == 0 || vocabSize > static_cast<size_t>(INT32_MAX))
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": vocab_size must be in [1, 2^31 - 1], got " +
                      std::to_string(vocabSize));
    const sampling::SamplingParams &p = sampler->sampler.params();
    request->top_k = 0;
    request->temperature = 1.0f;
    if (greedyWithoutPenalty(p)) {
      request->output = LLMC_OUTPUT_ARGMAX;
    } else if (sampler->sampler.drawsFromTopK(static_cast<int32_t>(vocabSize))) {
      request->output = LLMC_OUTPUT_TOP_K;
      request->top_k = p.topK;
      request->temperature = p.temperature;
    } else {
      request->output = LLMC_OUTPUT_LOGITS;
    }
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_sampler_sample_row(llmc_sampler *sampler, const llmc_step_row *row,
                                    size_t vocabSize, const int32_t *seen, size_t numSeen,
                                    int32_t *token) {
  const char *fn = "llmc_sampler_sample_row";
  return guarded(fn, [&]() -> llmc_status {
    if (llmc_status bad = checkSampleArguments(fn, sampler, token, seen, numSeen, vocabSize);
        bad != LLMC_STATUS_OK)
      return bad;
    if (row == nullptr)
      return nullArgument(fn, "row");
    sampling::Sampler &s = sampler->sampler;
    const auto vocab = static_cast<int32_t>(vocabSize);
    if (row->kind == LLMC_OUTPUT_ARGMAX && greedyWithoutPenalty(s.params()) && row->token >= 0 &&
        row->token < vocab) {
      *token = row->token;
      return LLMC_STATUS_OK;
    }
    if (row->kind == LLMC_OUTPUT_TOP_K && row->scores != nullptr && row->candidates != nullptr &&
        row->num_candidates >= 1 && row->num_candidates <= hd::kTopKCapacity &&
        s.drawsFromTopK(vocab)) {
      *token = s.sampleTopK(row->scores, row->candidates, row->num_candidates, vocab);
      return LLMC_STATUS_OK;
    }
    if (row->logits != nullptr) {
      *token = s.sample(row->logits, vocab, seen, static_cast<int64_t>(numSeen));
      return LLMC_STATUS_OK;
    }
    return fail(LLMC_STATUS_INVALID_ARGUMENT,
                std::string(fn) + ": the row holds no logits and its kind cannot give this "
                                  "sampler's token (ask for the kind llmc_sampler_output_kind "
                                  "names)");
  });
}

} // extern "C"
