#include "plan/plan.h"

#include "kernels/common/activations.h"
#include "kernels/common/q4_layout.h"
#include "plan/checksum.h"
#include "plan/plan_format.h"
#include "tokenizer/utf8.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <set>

#include <sys/resource.h>
#include <unistd.h>

namespace llmc {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// "4.00 GiB", for figures next to the exact byte count.
std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

bool isFloat(fb::DType t) {
  return t == fb::DType::F32 || t == fb::DType::F16 || t == fb::DType::BF16;
}

// a * b (head counts times head_dim from a plan), or -1, which no width or
// column count equals, when it overflows.
int64_t checkedProduct(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? int64_t{-1} : product;
}

bool validDType(fb::DType t) {
  return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumDTypes;
}

// FlatBuffers' verifier checks a vector's length field but not that 8-byte
// elements are 8-byte aligned; a crafted file could make reads misaligned.
template <typename T> bool aligned(const flatbuffers::Vector<T> *v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

Status checkHeader(const uint8_t *data, uint64_t size, const std::string &name, bool verifyChecksum,
                   PlanFileHeader *header) {
  if (size < sizeof(PlanFileHeader))
    return Status::error(name + ": file is " + str(size) +
                         " bytes, shorter than the 64-byte plan header (truncated?)");
  std::memcpy(header, data, sizeof(PlanFileHeader));
  if (std::memcmp(header->magic, kPlanMagic, sizeof(kPlanMagic)) != 0)
    return Status::error(name + ": not an llmc engine plan (bad magic; expected \"LLMCPLAN\")");
  if (header->formatVersion > kPlanFormatVersion)
    return Status::error(name + ": plan format version " + str(header->formatVersion) +
                         " is newer than this runtime supports (" + str(kPlanFormatVersion) +
                         "); update llmrun, or rebuild the plan with this llmc");
  if (header->formatVersion < kPlanFormatVersion)
    return Status::error(name + ": plan format version " + str(header->formatVersion) +
                         " is older than this runtime reads (" + str(kPlanFormatVersion) +
                         "); rebuild the plan with this llmc (llmc build)");
  if (header->headerSize != sizeof(PlanFileHeader))
    return Status::error(name + ": header size " + str(header->headerSize) + ", expected 64");
  uint64_t metaEnd = 0, weightsEnd = 0;
  if (__builtin_add_overflow(header->metadataOffset, header->metadataSize, &metaEnd) ||
      header->metadataOffset < sizeof(PlanFileHeader) || metaEnd > size)
    return Status::error(name + ": metadata section [" + str(header->metadataOffset) + ", +" +
                         str(header->metadataSize) + ") lies outside the file of " + str(size) +
                         " bytes (truncated?)");
  if (__builtin_add_overflow(header->weightsOffset, header->weightsSize, &weightsEnd) ||
      header->weightsOffset < metaEnd || weightsEnd != size)
    return Status::error(name + ": weight section [" + str(header->weightsOffset) + ", +" +
                         str(header->weightsSize) + ") must follow the metadata and end at the " +
                         "end of the file (" + str(size) + " bytes; truncated?)");
  if (header->weightsOffset % kPlanWeightAlignment != 0)
    return Status::error(name + ": weight section offset " + str(header->weightsOffset) +
                         " is not a multiple of " + str(kPlanWeightAlignment));
  if (verifyChecksum &&
      fnv1a64(data + header->metadataOffset, header->metadataSize) != header->metadataChecksum)
    return Status::error(name + ": metadata checksum mismatch (the file is corrupt)");
  return Status::ok();
}

Status checkModel(const fb::Plan &plan, const std::string &name) {
  const fb::ModelInfo *m = plan.model();
  if (m == nullptr)
    return Status::error(name + ": metadata has no model info");
  auto bad = [&](const char *field, int64_t value) {
    return Status::error(name + ": model." + field + " = " + std::to_string(value) + " is invalid");
  };
  if (!aligned(m->bos_token_ids()) || !aligned(m->eos_token_ids()))
    return Status::error(name + ": misaligned model token id lists (corrupt plan)");
  if (m->hidden_size() <= 0)
    return bad("hidden_size", m->hidden_size());
  if (m->intermediate_size() <= 0)
    return bad("intermediate_size", m->intermediate_size());
  if (m->num_layers() <= 0 || m->num_layers() > 1024)
    return bad("num_layers", m->num_layers());
  if (m->num_heads() <= 0 || m->num_heads() > 4096)
    return bad("num_heads", m->num_heads());
  if (m->num_kv_heads() <= 0 || m->num_heads() % m->num_kv_heads() != 0)
    return bad("num_kv_heads", m->num_kv_heads());
  if (m->head_dim() <= 0 || m->head_dim() > 4096 || m->head_dim() % 2 != 0)
    return bad("head_dim", m->head_dim());
  if (m->vocab_size() <= 0 || m->vocab_size() > (int64_t(1) << 31))
    return bad("vocab_size", m->vocab_size());
  if (m->max_seq_len() <= 0 || m->max_seq_len() > kMaxPlanSeqLen)
    return bad("max_seq_len", m->max_seq_len());
  if (!(m->rms_norm_eps() > 0.0) || !(m->rope_theta() > 0.0))
    return Status::error(name + ": model.rms_norm_eps and model.rope_theta must be positive");
  if (m->rope_scaling() > fb::RopeScalingKind::MAX)
    return bad("rope_scaling", static_cast<int64_t>(m->rope_scaling()));
  if (plan.tokenizer() == nullptr || plan.tokenizer()->tokenizer_json() == nullptr)
    return Status::error(name + ": metadata has no tokenizer");
  const fb::KvCacheInfo *kv = plan.kv_cache();
  if (kv == nullptr || kv->num_layers() != m->num_layers() ||
      kv->num_kv_heads() != m->num_kv_heads() || kv->head_dim() != m->head_dim() ||
      kv->block_size() <= 0 || kv->block_size() > 1024 || kv->dtype() != fb::DType::F32)
    return Status::error(name + ": kv_cache geometry does not match the model (layers, kv heads, " +
                         "head dim), or has an invalid block size or dtype");
  return Status::ok();
}

// The chat templates, special token strings and sampling defaults (the
// build validated them; a plan from elsewhere may not have been).
Status checkGenerationSettings(const fb::Plan &plan, const std::string &name) {
  constexpr size_t kMaxTemplateBytes = size_t(1) << 20, kMaxTemplates = 64, kMaxTokenBytes = 1024;
  const fb::TokenizerInfo &t = *plan.tokenizer();
  if (const auto *templates = t.chat_templates()) {
    if (templates->size() > kMaxTemplates)
      return Status::error(name + ": tokenizer.chat_templates has " + str(templates->size()) +
                           " entries, over the limit of " + str(kMaxTemplates));
    for (const fb::ChatTemplate *ct : *templates) {
      if (ct->name() == nullptr || ct->name()->size() == 0 || ct->source() == nullptr)
        return Status::error(name + ": tokenizer.chat_templates: an entry has no name or source");
      const std::string where = name + ": tokenizer.chat_templates '" + ct->name()->str() + "'";
      if (ct->source()->size() > kMaxTemplateBytes)
        return Status::error(where + ": " + str(ct->source()->size()) +
                             " bytes, over the limit of " + str(kMaxTemplateBytes));
      if (!utf8::isValid(ct->name()->string_view()) || !utf8::isValid(ct->source()->string_view()))
        return Status::error(where + ": not valid UTF-8 (corrupt plan)");
    }
  }
  const std::pair<const char *, const flatbuffers::String *> tokens[] = {
      {"bos_token", t.bos_token()},
      {"eos_token", t.eos_token()},
      {"pad_token", t.pad_token()},
      {"unk_token", t.unk_token()}};
  for (const auto &[field, value] : tokens)
    if (value != nullptr && (value->size() > kMaxTokenBytes || !utf8::isValid(value->string_view())))
      return Status::error(name + ": tokenizer." + field +
                           " is over 1024 bytes or not valid UTF-8 (corrupt plan)");
  if (const fb::GenerationDefaults *g = plan.generation()) {
    auto badFloat = [&](const char *field, flatbuffers::Optional<float> v, float lo, float hi,
                        bool loOpen) {
      return v.has_value() &&
             !(*v <= hi && (loOpen ? *v > lo : *v >= lo)); // NaN fails both
    };
    const char *bad = badFloat("temperature", g->temperature(), 0.0f, 1e6f, false) ? "temperature"
                      : badFloat("top_p", g->top_p(), 0.0f, 1.0f, true)            ? "top_p"
                      : badFloat("min_p", g->min_p(), 0.0f, 1.0f, false)           ? "min_p"
                      : badFloat("repetition_penalty", g->repetition_penalty(), 0.0f, 1e6f, true)
                          ? "repetition_penalty"
                      : (g->top_k().has_value() && *g->top_k() < 0) ? "top_k"
                      : (g->max_new_tokens().has_value() && *g->max_new_tokens() < 0)
                          ? "max_new_tokens"
                          : nullptr;
    if (bad != nullptr)
      return Status::error(name + ": generation." + bad + " is out of range (corrupt plan)");
  }
  return Status::ok();
}

// A synthetic tensor's init rule; an int4 part (Q4*) must have the shape and
// dtype of that part of a [rows, cols] matrix in groups of group_size.
Status checkSyntheticInit(const fb::Tensor &t, const std::string &where) {
  const fb::SyntheticInit &init = *t.synthetic();
  if (init.kind() > fb::SyntheticKind::MAX)
    return Status::error(where + ": unknown synthetic init kind " +
                         str(static_cast<uint64_t>(init.kind())));
  if (!isSyntheticQ4(init.kind()))
    return Status::ok();
  const bool words = init.kind() == fb::SyntheticKind::Q4Weight;
  const std::string kind = fb::EnumNameSyntheticKind(init.kind());
  if (init.cols() <= 0 || init.cols() > (int64_t{1} << 40) ||
      !hd::q4ValidGroupSize(init.group_size()))
    return Status::error(where + ": synthetic " + kind + " init has cols " +
                         std::to_string(init.cols()) + " and group_size " +
                         std::to_string(init.group_size()) +
                         " (want cols > 0, group_size a positive multiple of 32)");
  const int64_t width =
      words ? hd::q4WordsPerRow(init.cols()) : hd::q4NumGroups(init.cols(), init.group_size());
  const fb::DType dtype = words ? fb::DType::I32 : fb::DType::F16;
  if (t.shape()->size() != 2 || t.shape()->Get(1) != width || t.dtype() != dtype)
    return Status::error(where + ": synthetic " + kind + " init for " +
                         std::to_string(init.cols()) + " columns in groups of " +
                         std::to_string(init.group_size()) + " needs a [rows, " + str(width) +
                         "] " + fb::EnumNameDType(dtype) + " tensor");
  return Status::ok();
}

Status checkTensors(const fb::Plan &plan, uint64_t weightsSize, const std::string &name) {
  if (plan.tensors() == nullptr)
    return Status::error(name + ": metadata has no tensor table");
  struct Range {
    uint64_t begin, end;
    uint32_t index;
  };
  std::vector<Range> stored;
  const auto &tensors = *plan.tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor *t = tensors.Get(i);
    std::string tname = t->name() ? t->name()->str() : "";
    std::string where = name + ": tensor " + str(i) + " '" + tname + "'";
    if (tname.empty())
      return Status::error(where + ": has no name");
    if (!validDType(t->dtype()))
      return Status::error(where + ": unknown dtype " + str(static_cast<uint64_t>(t->dtype())));
    if (!aligned(t->shape()))
      return Status::error(where + ": misaligned shape (corrupt plan)");
    if (t->shape() == nullptr || t->shape()->size() == 0 || t->shape()->size() > 8)
      return Status::error(where + ": shape must have 1 to 8 dimensions");
    uint64_t bytes = dtypeSize(static_cast<DType>(t->dtype()));
    for (int64_t d : *t->shape()) {
      if (d <= 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        return Status::error(where + ": invalid or overflowing shape dimension " +
                             std::to_string(d));
    }
    if (bytes != t->size())
      return Status::error(where + ": dtype x shape is " + str(bytes) + " bytes but size is " +
                           str(t->size()));
    if (t->synthetic() != nullptr) {
      if (!plan.synthetic())
        return Status::error(where + ": synthetic init in a plan with real weights");
      LLMC_RETURN_IF_ERROR(checkSyntheticInit(*t, where));
      continue;
    }
    if (plan.synthetic())
      return Status::error(where + ": synthetic plan tensor without an init rule");
    uint64_t end = 0;
    if (t->offset() % kPlanWeightAlignment != 0)
      return Status::error(where + ": offset " + str(t->offset()) + " is not a multiple of " +
                           str(kPlanWeightAlignment));
    if (__builtin_add_overflow(t->offset(), t->size(), &end) || end > weightsSize)
      return Status::error(where + ": data [" + str(t->offset()) + ", +" + str(t->size()) +
                           ") lies outside the weight section of " + str(weightsSize) + " bytes");
    stored.push_back({t->offset(), end, i});
  }
  std::sort(stored.begin(), stored.end(),
            [](const Range &a, const Range &b) { return a.begin < b.begin; });
  for (size_t i = 1; i < stored.size(); ++i)
    if (stored[i].begin < stored[i - 1].end)
      return Status::error(name + ": tensors " + str(stored[i - 1].index) + " and " +
                           str(stored[i].index) + " overlap in the weight section");
  return Status::ok();
}

// --- GPU programs: kernel modules, kernel references, launch shapes. ---

constexpr uint64_t kMaxSharedBytes = 227 * 1024;            // sm_90 opt-in limit per block
constexpr uint64_t kMaxScratchPerToken = uint64_t(1) << 30; // workspace and counters per row
constexpr uint64_t kGpuBufferAlignment = 16;                // the GPU kernels' 16-byte vector loads

const fb::KernelModule *findModule(const fb::Plan &plan, fb::Target target) {
  if (plan.modules() == nullptr)
    return nullptr;
  for (const fb::KernelModule *m : *plan.modules())
    if (m->target() == target)
      return m;
  return nullptr;
}

Status checkKernelModules(const fb::Plan &plan, const std::string &name) {
  if (plan.modules() == nullptr)
    return Status::ok();
  bool seen[3] = {false, false, false};
  for (uint32_t i = 0; i < plan.modules()->size(); ++i) {
    const fb::KernelModule &m = *plan.modules()->Get(i);
    std::string where = name + ": kernel module " + std::to_string(i);
    if (m.target() != fb::Target::Sm90a && m.target() != fb::Target::Ptx)
      return Status::error(where + ": target must be Sm90a or Ptx");
    int t = static_cast<int>(m.target());
    if (seen[t])
      return Status::error(where + ": a second module for target " +
                           fb::EnumNameTarget(m.target()));
    seen[t] = true;
    if (m.image() == nullptr || m.image()->size() == 0)
      return Status::error(where + " (" + fb::EnumNameTarget(m.target()) + "): empty image");
    if (m.target() == fb::Target::Ptx && m.image()->Get(m.image()->size() - 1) != 0)
      return Status::error(where + " (Ptx): the PTX text is not NUL-terminated");
    if (m.functions() == nullptr || m.functions()->size() == 0)
      return Status::error(where + ": lists no functions");
    for (uint32_t f = 0; f < m.functions()->size(); ++f)
      if (m.functions()->Get(f)->size() == 0)
        return Status::error(where + ": function " + std::to_string(f) + " has no name");
  }
  return Status::ok();
}

Status checkGpuStep(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                    const std::string &where) {
  const fb::KernelModule *module = findModule(plan, program.target());
  if (module == nullptr || step.kernel() < 0 ||
      static_cast<uint32_t>(step.kernel()) >= module->functions()->size())
    return Status::error(where + ": kernel index " + std::to_string(step.kernel()) +
                         " has no function in a module for target " +
                         fb::EnumNameTarget(program.target()));
  auto dims = [](const flatbuffers::Vector<uint32_t> *v) { return v ? v->size() : 0u; };
  if (dims(step.grid()) != 3 || dims(step.block()) != 3)
    return Status::error(where + ": grid and block must have 3 dimensions");
  uint64_t threads = 1;
  for (uint32_t d = 0; d < 3; ++d) {
    if (step.grid()->Get(d) == 0 || step.block()->Get(d) == 0)
      return Status::error(where + ": grid and block dimensions must be positive");
    threads *= step.block()->Get(d);
  }
  if (threads > 1024 || step.grid()->Get(1) > 65535 || step.grid()->Get(2) > 65535)
    return Status::error(where + ": launch shape exceeds the CUDA limits (1024 threads per "
                                 "block, grid y and z at most 65535)");
  if (step.shared_bytes() > kMaxSharedBytes)
    return Status::error(where + ": " + std::to_string(step.shared_bytes()) +
                         " bytes of shared memory exceed " + std::to_string(kMaxSharedBytes));
  if (step.grid_token_axis() > 3 || (step.grid_token_axis() != 0 && step.tokens_per_block() == 0))
    return Status::error(where + ": grid_token_axis must be 0..3, with tokens_per_block > 0");
  if (step.workspace_bytes_per_token() > kMaxScratchPerToken ||
      step.counters_per_token() > kMaxScratchPerToken)
    return Status::error(where + ": workspace or counters per token exceed 1 GiB");
  return Status::ok();
}

} // namespace

namespace {

// Where a kind keeps its optional trailing parameters (engine.fbs): indices
// into float_params (F) and int_params (I), -1 where it has none.
struct ExtraSlots {
  int offsetF = -1, scaleF = -1, softcapF = -1, windowI = -1, gateI = -1;
};

ExtraSlots extraSlots(fb::OpKind op) {
  ExtraSlots s;
  switch (op) {
  case fb::OpKind::Embedding:
    s.scaleF = 0;
    break;
  case fb::OpKind::RmsNorm:
  case fb::OpKind::RmsNormLinear:
  case fb::OpKind::RmsNormLinearQ4:
    s.offsetF = 1;
    break;
  case fb::OpKind::Logits:
    s.softcapF = 0;
    break;
  case fb::OpKind::LmHead:
    s.offsetF = 1;
    s.softcapF = 2;
    break;
  case fb::OpKind::Attention:
    s.windowI = 4;
    s.softcapF = 1;
    break;
  case fb::OpKind::RopeAttention:
    s.windowI = 8;
    s.softcapF = 1;
    break;
  case fb::OpKind::LinearSwiGlu:
    s.gateI = 0;
    break;
  case fb::OpKind::RmsNormLinearSwiGlu:
    s.gateI = 0;
    s.offsetF = 1;
    break;
  case fb::OpKind::LinearSwiGluQ4:
    s.gateI = 1;
    break;
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    s.gateI = 1;
    s.offsetF = 1;
    break;
  case fb::OpKind::Linear:
  case fb::OpKind::Rope:
  case fb::OpKind::Add:
  case fb::OpKind::Mul:
  case fb::OpKind::Silu:
  case fb::OpKind::SwiGlu:
  case fb::OpKind::LinearQ4:
  case fb::OpKind::RopeColumns:
  case fb::OpKind::Gelu:
    break;
  }
  return s;
}

// The operand and parameter counts a kind requires (its optional ones excluded).
struct RequiredCounts {
  int inputs, outputs, minWeights, maxWeights, intParams, floatParams;
};

RequiredCounts requiredSignature(fb::OpKind op) {
  switch (op) {
  case fb::OpKind::Embedding:
    return {1, 1, 1, 1, 0, 0};
  case fb::OpKind::RmsNorm:
    return {1, 1, 1, 1, 0, 1};
  case fb::OpKind::Linear:
    return {1, 1, 1, 2, 1, 0};
  case fb::OpKind::Rope:
    return {1, 1, 0, 0, 2, 0};
  case fb::OpKind::Attention:
    return {3, 1, 0, 0, 4, 1};
  case fb::OpKind::Add:
  case fb::OpKind::Mul:
    return {2, 1, 0, 0, 0, 0};
  case fb::OpKind::Silu:
    return {1, 1, 0, 0, 0, 0};
  case fb::OpKind::SwiGlu:
    return {2, 1, 0, 0, 0, 0};
  case fb::OpKind::Logits:
    return {1, 1, 1, 1, 0, 0};
  case fb::OpKind::LinearQ4:
    return {1, 1, 3, 4, 2, 0};
  case fb::OpKind::RmsNormLinear:
    return {1, 1, 2, 3, 1, 1};
  case fb::OpKind::LinearSwiGlu:
    return {1, 1, 1, 1, 0, 0};
  case fb::OpKind::RmsNormLinearSwiGlu:
    return {1, 1, 2, 2, 0, 1};
  case fb::OpKind::RopeAttention:
    return {3, 1, 0, 0, 8, 1};
  case fb::OpKind::RopeColumns:
    return {1, 1, 0, 0, 3, 0};
  case fb::OpKind::LmHead:
    return {1, 2, 2, 2, 0, 1};
  case fb::OpKind::RmsNormLinearQ4:
    return {1, 1, 4, 5, 2, 1};
  case fb::OpKind::LinearSwiGluQ4:
    return {1, 1, 3, 3, 1, 0};
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    return {1, 1, 4, 4, 1, 1};
  case fb::OpKind::Gelu:
    return {1, 1, 0, 0, 1, 0};
  }
  return {-1, -1, -1, -1, -1, -1};
}

} // namespace

OpSignature opSignature(fb::OpKind op) {
  const RequiredCounts r = requiredSignature(op);
  OpSignature sig{r.inputs, r.outputs, r.minWeights, r.maxWeights, r.intParams, r.floatParams,
                  r.intParams, r.floatParams};
  const ExtraSlots s = extraSlots(op);
  sig.maxIntParams = std::max({sig.intParams, s.windowI + 1, s.gateI + 1});
  sig.maxFloatParams = std::max({sig.floatParams, s.offsetF + 1, s.scaleF + 1, s.softcapF + 1});
  return sig;
}

StepExtras stepExtras(fb::OpKind op, const int64_t *ints, size_t numInts, const double *floats,
                      size_t numFloats) {
  const ExtraSlots s = extraSlots(op);
  StepExtras e;
  auto f = [&](int slot, double &value) {
    if (slot >= 0 && static_cast<size_t>(slot) < numFloats)
      value = floats[slot];
  };
  auto i = [&](int slot, int64_t &value) {
    if (slot >= 0 && static_cast<size_t>(slot) < numInts)
      value = ints[slot];
  };
  f(s.offsetF, e.normOffset);
  f(s.scaleF, e.embeddingScale);
  f(s.softcapF, e.softcap);
  i(s.windowI, e.window);
  i(s.gateI, e.gate);
  return e;
}

StepExtras stepExtras(const fb::Step &step) {
  auto ints = step.int_params();
  auto floats = step.float_params();
  return stepExtras(step.op(), ints ? ints->data() : nullptr, ints ? ints->size() : 0,
                    floats ? floats->data() : nullptr, floats ? floats->size() : 0);
}

StepExtras stepExtras(const fb::StepT &step) {
  return stepExtras(step.op, step.int_params.data(), step.int_params.size(),
                    step.float_params.data(), step.float_params.size());
}

std::vector<int32_t> attentionWindows(const fb::Plan &plan) {
  std::vector<int32_t> windows(static_cast<size_t>(std::max<int64_t>(0, plan.model()->num_layers())), 0);
  if (plan.programs() == nullptr || plan.programs()->size() == 0)
    return windows;
  for (const fb::Step *step : *plan.programs()->Get(0)->steps()) {
    if (step->op() != fb::OpKind::Attention && step->op() != fb::OpKind::RopeAttention)
      continue;
    const int64_t layer = step->int_params()->Get(0); // in range: the loader checked it
    if (layer >= 0 && static_cast<size_t>(layer) < windows.size())
      windows[static_cast<size_t>(layer)] = static_cast<int32_t>(stepExtras(*step).window);
  }
  return windows;
}

void setStepExtras(fb::StepT &step, const StepExtras &extras) {
  const ExtraSlots s = extraSlots(step.op);
  const StepExtras defaults;
  // Writes `value` at `slot` when it is not the default, filling the slots
  // between with their defaults (`fill`: the default of each slot index).
  auto put = [](auto &list, int slot, auto value, auto defaultValue, auto fill) {
    if (slot < 0 || value == defaultValue)
      return;
    while (static_cast<int>(list.size()) < slot)
      list.push_back(fill(static_cast<int>(list.size())));
    if (static_cast<int>(list.size()) == slot)
      list.push_back(value);
    else
      list[slot] = value;
  };
  auto floatDefault = [&](int slot) {
    return slot == s.scaleF ? defaults.embeddingScale : 0.0; // offset, softcap: 0
  };
  auto intDefault = [](int) { return int64_t{0}; }; // window, gate: 0
  put(step.float_params, s.offsetF, extras.normOffset, defaults.normOffset, floatDefault);
  put(step.float_params, s.scaleF, extras.embeddingScale, defaults.embeddingScale, floatDefault);
  put(step.float_params, s.softcapF, extras.softcap, defaults.softcap, floatDefault);
  put(step.int_params, s.windowI, extras.window, defaults.window, intDefault);
  put(step.int_params, s.gateI, extras.gate, defaults.gate, intDefault);
}

bool isSyntheticQ4(fb::SyntheticKind kind) {
  return kind == fb::SyntheticKind::Q4Weight || kind == fb::SyntheticKind::Q4Scales ||
         kind == fb::SyntheticKind::Q4Zeros;
}

Int4Linear int4Linear(fb::OpKind op) {
  switch (op) {
  case fb::OpKind::LinearQ4:
    return {true, false, false};
  case fb::OpKind::RmsNormLinearQ4:
    return {true, true, false};
  case fb::OpKind::LinearSwiGluQ4:
    return {true, false, true};
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    return {true, true, true};
  default:
    return {};
  }
}

namespace {

// The optional trailing parameters' ranges: what the kernels can run.
Status checkStepExtras(const fb::Step &step, const std::string &where) {
  const StepExtras e = stepExtras(step);
  if (!std::isfinite(e.normOffset))
    return Status::error(where + ": norm offset " + std::to_string(e.normOffset) +
                         " is not finite");
  if (!std::isfinite(e.embeddingScale) || e.embeddingScale == 0.0)
    return Status::error(where + ": embedding scale " + std::to_string(e.embeddingScale) +
                         " must be finite and non-zero");
  if (!(e.softcap >= 0.0) || !std::isfinite(e.softcap))
    return Status::error(where + ": softcap " + std::to_string(e.softcap) +
                         " must be 0 (off) or positive and finite");
  if (e.window < 0 || e.window > INT32_MAX)
    return Status::error(where + ": attention window " + std::to_string(e.window) +
                         " must be 0 (off) or in [1, 2^31)");
  if (e.gate < 0 || e.gate >= hd::kNumGateKinds)
    return Status::error(where + ": gated activation " + std::to_string(e.gate) +
                         " is not 0 (silu), 1 (gelu tanh) or 2 (gelu erf)");
  return Status::ok();
}

// Checks one step's operands against its op kind and the buffers/tensors it names.
Status checkStep(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                 const std::string &where) {
  if (step.op() > fb::OpKind::MAX)
    return Status::error(where + ": unknown op kind " + str(static_cast<uint64_t>(step.op())));
  if (!aligned(step.int_params()) || !aligned(step.float_params()))
    return Status::error(where + ": misaligned step parameters (corrupt plan)");
  OpSignature sig = opSignature(step.op());
  auto count = [](const auto *v) { return v == nullptr ? 0 : static_cast<int>(v->size()); };
  std::string op = fb::EnumNameOpKind(step.op());
  if (count(step.inputs()) != sig.inputs || count(step.outputs()) != sig.outputs ||
      count(step.weights()) < sig.minWeights || count(step.weights()) > sig.maxWeights ||
      count(step.int_params()) < sig.intParams || count(step.int_params()) > sig.maxIntParams ||
      count(step.float_params()) < sig.floatParams ||
      count(step.float_params()) > sig.maxFloatParams)
    return Status::error(where + ": " + op + " has the wrong number of inputs, outputs, weights " +
                         "or parameters");
  LLMC_RETURN_IF_ERROR(checkStepExtras(step, where + ": " + op));
  uint32_t numBuffers = program.buffers()->size();
  for (const auto *list : {step.inputs(), step.outputs()})
    if (list != nullptr)
      for (int b : *list)
        if (b < 0 || static_cast<uint32_t>(b) >= numBuffers)
          return Status::error(where + ": " + op + " names buffer " + std::to_string(b) +
                               " but the program has " + str(numBuffers));
  uint32_t numTensors = plan.tensors()->size();
  if (step.weights() != nullptr)
    for (int w : *step.weights())
      if (w < 0 || static_cast<uint32_t>(w) >= numTensors)
        return Status::error(where + ": " + op + " names tensor " + std::to_string(w) +
                             " but the plan has " + str(numTensors));
  if (step.op() == fb::OpKind::Attention || step.op() == fb::OpKind::RopeAttention) {
    int64_t layer = step.int_params()->Get(0);
    if (layer < 0 || layer >= plan.model()->num_layers())
      return Status::error(where + ": attention layer " + std::to_string(layer) + " out of range");
  }
  if (program.target() == fb::Target::Cpu) {
    if (step.kernel() != -1)
      return Status::error(where + ": a CPU step must not reference a kernel");
  } else {
    LLMC_RETURN_IF_ERROR(checkGpuStep(plan, program, step, where));
  }
  return Status::ok();
}

std::string describeTensor(const fb::Tensor &t) {
  std::string text = std::string(fb::EnumNameDType(t.dtype())) + " [";
  for (uint32_t i = 0; i < t.shape()->size(); ++i)
    text += (i ? ", " : "") + std::to_string(t.shape()->Get(i));
  return text + "]";
}

// LinearQ4 and the fused int4 kinds: the int4 tensors
// (kernels/common/q4_layout.h) must have the dtypes and shapes the kernels
// index by, for K = input width, N = output width (2 x with SwiGLU: gate and
// up rows) and the step's group size G; a norm weight [K] comes first.
Status checkLinearQ4(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                     const std::string &where) {
  const Int4Linear form = int4Linear(step.op());
  auto width = [&](int b) { return program.buffers()->Get(b)->width(); };
  auto tensor = [&](int i) { return plan.tensors()->Get(step.weights()->Get(i + form.norm)); };
  auto fail = [&](const std::string &what) {
    return Status::error(where + ": " + fb::EnumNameOpKind(step.op()) + ": " + what);
  };
  const int in = step.inputs()->Get(0), out = step.outputs()->Get(0);
  const int64_t k = width(in), n = width(out) * (form.swiglu ? 2 : 1);
  const int64_t group = step.int_params()->Get(form.swiglu ? 0 : 1);
  if (!hd::q4ValidGroupSize(group))
    return fail("group size " + std::to_string(group) + " is not a positive multiple of 32");
  if (form.norm) {
    const fb::Tensor &gamma = *plan.tensors()->Get(step.weights()->Get(0));
    if (!isFloat(gamma.dtype()) || gamma.shape()->size() != 1 || gamma.shape()->Get(0) != k)
      return fail("norm weight '" + gamma.name()->str() + "' must be a float [" +
                  std::to_string(k) + "] for the input width, got " + describeTensor(gamma));
    if (!(step.float_params()->Get(0) > 0.0))
      return fail("eps must be positive");
  }
  const int64_t groups = hd::q4NumGroups(k, group);
  const struct {
    fb::DType dtype;
    int64_t cols;
    const char *what;
  } parts[] = {{fb::DType::I32, hd::q4WordsPerRow(k), "packed int4 words"},
               {fb::DType::F16, groups, "scales"},
               {fb::DType::F16, groups, "zeros"}};
  for (int i = 0; i < 3; ++i) {
    const fb::Tensor &t = *tensor(i);
    if (t.dtype() != parts[i].dtype || t.shape()->size() != 2 || t.shape()->Get(0) != n ||
        t.shape()->Get(1) != parts[i].cols)
      return fail("tensor '" + t.name()->str() + "' (" + parts[i].what + ") must be " +
                  fb::EnumNameDType(parts[i].dtype) + " [" + std::to_string(n) + ", " +
                  std::to_string(parts[i].cols) + "] for K = " + std::to_string(k) +
                  " in groups of " + std::to_string(group) + " (" + std::to_string(groups) +
                  " groups), got " + describeTensor(t));
  }
  if (!form.swiglu && step.weights()->size() == (form.norm ? 5u : 4u)) {
    const fb::Tensor &bias = *tensor(3);
    if (bias.dtype() != fb::DType::F32 || bias.shape()->size() != 1 || bias.shape()->Get(0) != n)
      return fail("bias '" + bias.name()->str() + "' must be F32 [" + std::to_string(n) +
                  "], got " + describeTensor(bias));
  }
  if (!form.swiglu && step.int_params()->Get(0) != 0 && step.int_params()->Get(0) != 1)
    return fail("accumulate must be 0 or 1");
  if (in == out)
    return fail("input and output must be different buffers");
  return Status::ok();
}

// The GEMM kinds with a norm prologue and/or a SwiGLU epilogue: weights
// ([gamma[K]], W[N,K] (, bias[N])) and widths as engine.fbs gives them.
Status checkFusedLinear(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                        const std::string &where) {
  auto width = [&](int b) { return program.buffers()->Get(b)->width(); };
  auto shape = [&](int i) { return plan.tensors()->Get(step.weights()->Get(i))->shape(); };
  auto fail = [&](const std::string &what) {
    return Status::error(where + ": " + fb::EnumNameOpKind(step.op()) + ": " + what);
  };
  const bool norm = step.op() != fb::OpKind::LinearSwiGlu;
  const bool swiglu = step.op() != fb::OpKind::RmsNormLinear;
  const int in = step.inputs()->Get(0), out = step.outputs()->Get(0);
  const int64_t k = width(in);
  if (norm && (shape(0)->size() != 1 || shape(0)->Get(0) != k))
    return fail("norm weight must be [K] for the input width K = " + std::to_string(k));
  if (norm && !(step.float_params()->Get(0) > 0.0))
    return fail("eps must be positive");
  auto w = shape(norm ? 1 : 0);
  if (w->size() != 2 || w->Get(1) != k)
    return fail("weight must be [N, K] for the input width K = " + std::to_string(k));
  const int64_t n = w->Get(0);
  if (swiglu && n % 2 != 0)
    return fail("weight must stack gate and up: [2I, K], got " + std::to_string(n) + " rows");
  if (width(out) != (swiglu ? n / 2 : n))
    return fail("output width " + std::to_string(width(out)) + " does not match the weight's " +
                std::to_string(n) + " rows" + (swiglu ? " (gate and up)" : ""));
  if (step.weights()->size() == 3 && (shape(2)->size() != 1 || shape(2)->Get(0) != n))
    return fail("bias must be [N]");
  if (!swiglu && step.int_params()->Get(0) != 0 && step.int_params()->Get(0) != 1)
    return fail("accumulate must be 0 or 1");
  if (in == out)
    return fail("input and output must be different buffers");
  return Status::ok();
}

// RopeAttention, RopeColumns and LmHead: head counts against the model,
// column ranges inside their buffers, the ids output of LmHead.
Status checkFusedAttentionOrHead(const fb::Plan &plan, const fb::Program &program,
                                 const fb::Step &step, const std::string &where) {
  auto buffer = [&](int b) { return program.buffers()->Get(b); };
  auto ints = [&](int i) { return step.int_params()->Get(i); };
  auto fail = [&](const std::string &what) {
    return Status::error(where + ": " + fb::EnumNameOpKind(step.op()) + ": " + what);
  };
  // Columns [column, column + features) must lie inside buffer b.
  auto inside = [&](int b, int64_t column, int64_t features) {
    return column >= 0 && features > 0 && column <= buffer(b)->width() - features;
  };
  const fb::ModelInfo &m = *plan.model();
  const int out = step.outputs()->Get(0);
  if (step.op() == fb::OpKind::RopeColumns) {
    if (step.inputs()->Get(0) != out || ints(0) <= 0 || ints(1) != m.head_dim() ||
        !inside(out, ints(2), checkedProduct(ints(0), ints(1))))
      return fail("must rotate heads of head_dim inside its buffer, in place");
    return Status::ok();
  }
  if (step.op() == fb::OpKind::RopeAttention) {
    const int64_t heads = ints(1), kvHeads = ints(2), dim = ints(3);
    if (kvHeads != m.num_kv_heads() || dim != m.head_dim() || heads <= 0 || heads % kvHeads != 0)
      return fail("head counts or head dim disagree with the model's KV cache");
    if (!inside(step.inputs()->Get(0), ints(4), checkedProduct(heads, dim)) ||
        !inside(step.inputs()->Get(1), ints(5), checkedProduct(kvHeads, dim)) ||
        !inside(step.inputs()->Get(2), ints(6), checkedProduct(kvHeads, dim)) ||
        buffer(out)->width() != checkedProduct(heads, dim))
      return fail("q/k/v columns lie outside their buffers or the output width is not heads * "
                  "head_dim");
    if (ints(7) != 0 && ints(7) != 1)
      return fail("rope must be 0 or 1");
    for (int i = 0; i < 3; ++i)
      if (step.inputs()->Get(i) == out)
        return fail("output must not alias an input");
    return Status::ok();
  }
  // LmHead.
  const int in = step.inputs()->Get(0), ids = step.outputs()->Get(1);
  auto gamma = plan.tensors()->Get(step.weights()->Get(0))->shape();
  auto w = plan.tensors()->Get(step.weights()->Get(1))->shape();
  const int64_t hidden = buffer(in)->width();
  if (gamma->size() != 1 || gamma->Get(0) != hidden || w->size() != 2 ||
      w->Get(0) != m.vocab_size() || w->Get(1) != hidden || buffer(out)->width() != w->Get(0))
    return fail("weights must be gamma [H] and [vocab_size, H], the output [T, vocab_size]");
  if (buffer(ids)->dtype() != fb::DType::I32 || buffer(ids)->width() != 1)
    return fail("the ids output must be I32 with width 1");
  if (!(step.float_params()->Get(0) > 0.0))
    return fail("eps must be positive");
  if (in == out || in == ids || out == ids)
    return fail("input and outputs must be different buffers");
  return Status::ok();
}

// Checks that a step's buffer widths and weight shapes fit its op, so that the
// executors can index without checks. Shapes per OpKind: see engine.fbs.
Status checkStepShapes(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                       const std::string &where) {
  auto buffer = [&](int index) { return program.buffers()->Get(index); };
  auto width = [&](int index) { return buffer(index)->width(); };
  auto in = [&](int i) { return step.inputs()->Get(i); };
  int out = step.outputs()->Get(0);
  auto weightShape = [&](int i) { return plan.tensors()->Get(step.weights()->Get(i))->shape(); };
  auto isFloatWeight = [&](int i) {
    return isFloat(plan.tensors()->Get(step.weights()->Get(i))->dtype());
  };
  std::string op = fb::EnumNameOpKind(step.op());
  auto mismatch = [&](const std::string &what) {
    return Status::error(where + ": " + op + ": " + what);
  };
  // Activations are F32; GPU programs may keep them in BF16 (their kernels are
  // specialized for the dtypes). Token ids are I32, logits F32 everywhere.
  bool gpu = program.target() != fb::Target::Cpu;
  auto activation = [&](fb::DType t) {
    return t == fb::DType::F32 || (gpu && t == fb::DType::BF16);
  };
  for (int i = 0; i < static_cast<int>(step.inputs()->size()); ++i) {
    bool tokens = step.op() == fb::OpKind::Embedding;
    fb::DType t = buffer(in(i))->dtype();
    if (tokens ? t != fb::DType::I32 : !activation(t))
      return mismatch("input " + std::to_string(i) + " has dtype " + fb::EnumNameDType(t) +
                      ", expected " +
                      (tokens ? "I32"
                       : gpu  ? "F32 or BF16"
                              : "F32"));
  }
  bool logits = step.op() == fb::OpKind::Logits || step.op() == fb::OpKind::LmHead;
  if (logits ? buffer(out)->dtype() != fb::DType::F32 : !activation(buffer(out)->dtype()))
    return mismatch(logits ? "output buffer must be F32"
                    : gpu  ? "output buffer must be F32 or BF16"
                           : "output buffer must be F32");
  if (step.weights() != nullptr && !int4Linear(step.op()).int4) // int4: checkLinearQ4
    for (int i = 0; i < static_cast<int>(step.weights()->size()); ++i)
      if (!isFloatWeight(i))
        return mismatch("weight " + std::to_string(i) + " must be F32, F16 or BF16");
  const fb::ModelInfo &m = *plan.model();
  switch (step.op()) {
  case fb::OpKind::Embedding:
  case fb::OpKind::Logits: {
    auto shape = weightShape(0);
    bool embed = step.op() == fb::OpKind::Embedding;
    if (shape->size() != 2 || shape->Get(0) != m.vocab_size())
      return mismatch("weight must be [vocab_size, hidden]");
    if ((embed && (width(in(0)) != 1 || width(out) != shape->Get(1))) ||
        (!embed && (width(in(0)) != shape->Get(1) || width(out) != shape->Get(0))))
      return mismatch("buffer widths do not match the weight shape");
    return Status::ok();
  }
  case fb::OpKind::RmsNorm: {
    auto shape = weightShape(0);
    if (shape->size() != 1 || shape->Get(0) != width(in(0)) || width(out) != width(in(0)))
      return mismatch("weight [H] and buffers [T,H] disagree");
    if (!(step.float_params()->Get(0) > 0.0))
      return mismatch("eps must be positive");
    return Status::ok();
  }
  case fb::OpKind::Linear: {
    auto shape = weightShape(0);
    if (shape->size() != 2 || shape->Get(1) != width(in(0)) || shape->Get(0) != width(out))
      return mismatch("weight [N,K] does not match input width K and output width N");
    if (step.weights()->size() == 2 &&
        (weightShape(1)->size() != 1 || weightShape(1)->Get(0) != shape->Get(0)))
      return mismatch("bias must be [N]");
    int64_t accumulate = step.int_params()->Get(0);
    if (accumulate != 0 && accumulate != 1)
      return mismatch("accumulate must be 0 or 1");
    if (in(0) == out)
      return mismatch("input and output must be different buffers");
    return Status::ok();
  }
  case fb::OpKind::LinearQ4:
  case fb::OpKind::RmsNormLinearQ4:
  case fb::OpKind::LinearSwiGluQ4:
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    return checkLinearQ4(plan, program, step, where);
  case fb::OpKind::Rope: {
    int64_t heads = step.int_params()->Get(0), dim = step.int_params()->Get(1);
    if (in(0) != out || heads <= 0 || dim != m.head_dim() ||
        width(out) != checkedProduct(heads, dim))
      return mismatch("must work in place on a [T, heads * head_dim] buffer");
    return Status::ok();
  }
  case fb::OpKind::Attention: {
    int64_t heads = step.int_params()->Get(1), kvHeads = step.int_params()->Get(2),
            dim = step.int_params()->Get(3);
    if (kvHeads != m.num_kv_heads() || dim != m.head_dim() || heads <= 0 || heads % kvHeads != 0)
      return mismatch("head counts or head dim disagree with the model's KV cache");
    if (width(in(0)) != checkedProduct(heads, dim) ||
        width(in(1)) != checkedProduct(kvHeads, dim) ||
        width(in(2)) != checkedProduct(kvHeads, dim) || width(out) != checkedProduct(heads, dim))
      return mismatch("q/k/v/out widths disagree with the head counts");
    for (int i = 0; i < 3; ++i)
      if (in(i) == out)
        return mismatch("output must not alias an input");
    return Status::ok();
  }
  case fb::OpKind::Add:
  case fb::OpKind::Mul:
  case fb::OpKind::SwiGlu:
    if (width(in(0)) != width(out) || width(in(1)) != width(out))
      return mismatch("inputs and output must have the same width");
    return Status::ok();
  case fb::OpKind::Silu:
    if (width(in(0)) != width(out))
      return mismatch("input and output must have the same width");
    return Status::ok();
  case fb::OpKind::Gelu:
    if (width(in(0)) != width(out))
      return mismatch("input and output must have the same width");
    if (step.int_params()->Get(0) != 0 && step.int_params()->Get(0) != 1)
      return mismatch("tanh must be 0 or 1");
    return Status::ok();
  case fb::OpKind::RmsNormLinear:
  case fb::OpKind::LinearSwiGlu:
  case fb::OpKind::RmsNormLinearSwiGlu:
    return checkFusedLinear(plan, program, step, where);
  case fb::OpKind::RopeAttention:
  case fb::OpKind::RopeColumns:
  case fb::OpKind::LmHead:
    return checkFusedAttentionOrHead(plan, program, step, where);
  }
  return mismatch("unknown op");
}

// A step's LibraryGemm (engine.fbs) must restate the step's own GEMM: the
// CUDA backend hands these numbers to cuBLASLt as they are. Runs after
// checkStepShapes (W is [N, K] for input width K and output width N).
Status checkLibraryGemm(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                        const std::string &where) {
  const fb::LibraryGemm *g = step.library_gemm();
  if (g == nullptr)
    return Status::ok();
  auto fail = [&](const std::string &what) {
    return Status::error(where + ": library_gemm: " + what);
  };
  if (program.target() == fb::Target::Cpu || program.max_tokens() != 0 ||
      step.op() != fb::OpKind::Linear)
    return fail(std::string("set on a ") + fb::EnumNameOpKind(step.op()) + " step of a " +
                fb::EnumNameTarget(program.target()) + " program with max_tokens " +
                std::to_string(program.max_tokens()) +
                "; only Linear steps of GPU programs for any T (max_tokens 0) may have one");
  const fb::Buffer &x = *program.buffers()->Get(step.inputs()->Get(0));
  const fb::Buffer &y = *program.buffers()->Get(step.outputs()->Get(0));
  const fb::Tensor &w = *plan.tensors()->Get(step.weights()->Get(0));
  if (x.dtype() != fb::DType::BF16 || y.dtype() != fb::DType::BF16 || w.dtype() != fb::DType::BF16)
    return fail(std::string("input, output and weight must be BF16, got ") +
                fb::EnumNameDType(x.dtype()) + ", " + fb::EnumNameDType(y.dtype()) + ", " +
                fb::EnumNameDType(w.dtype()));
  const struct {
    const char *field;
    int64_t got, want;
    const char *what;
  } fields[] = {{"n", g->n(), w.shape()->Get(0), "the weight's rows"},
                {"k", g->k(), w.shape()->Get(1), "the weight's columns"},
                {"lda", g->lda(), w.shape()->Get(1), "the weight's row length"},
                {"ldb", g->ldb(), x.width(), "the input buffer's width"},
                {"ldc", g->ldc(), y.width(), "the output buffer's width"}};
  for (const auto &f : fields)
    if (f.got != f.want)
      return fail(std::string(f.field) + " = " + std::to_string(f.got) + ", expected " +
                  std::to_string(f.want) + " (" + f.what + ")");
  const float beta = step.int_params()->Get(0) == 1 ? 1.0f : 0.0f;
  if (g->beta() != beta)
    return fail("beta = " + std::to_string(g->beta()) + ", expected " + std::to_string(beta) +
                " (the step's accumulate flag)");
  const bool bias = step.weights()->size() == 2;
  if (g->bias() != bias)
    return fail(std::string("bias = ") + (g->bias() ? "true" : "false") + " but the step has " +
                (bias ? "a bias" : "no bias"));
  if (bias && plan.tensors()->Get(step.weights()->Get(1))->dtype() != fb::DType::F32)
    return fail("the bias must be F32");
  return Status::ok();
}

// Every buffer's offset is a multiple of what its kernels load at once: the
// element size on the CPU (its SIMD loads and stores are unaligned ones, the
// scalar code needs aligned elements), 16 bytes on a GPU (the kernels' 16-byte
// vector loads). A multiple per token stays one at any T (offset * T).
Status checkBufferAlignment(const fb::Program &program, const std::string &where) {
  for (uint32_t b = 0; b < program.buffers()->size(); ++b) {
    const fb::Buffer &buffer = *program.buffers()->Get(b);
    const uint64_t alignment = program.target() == fb::Target::Cpu
                                   ? dtypeSize(static_cast<DType>(buffer.dtype()))
                                   : kGpuBufferAlignment;
    if (buffer.offset_per_token() % alignment != 0)
      return Status::error(where + ": buffer " + str(b) + " (" + fb::EnumNameDType(buffer.dtype()) +
                           ") has offset_per_token " + str(buffer.offset_per_token()) +
                           ", not a multiple of " + str(alignment) + " bytes (misaligned " +
                           (program.target() == fb::Target::Cpu ? "elements" : "vector loads") +
                           "; rebuild the plan)");
  }
  return Status::ok();
}

// The memory plan's promise, proven from the program order: a buffer is live
// from the first step that touches it to the last (the token buffer from
// before step 0, the logits and a LmHead's ids to after the last step), and
// two buffers live at the same step never share arena bytes. That covers a
// step's output overlapping its inputs. Buffers no step touches are never
// read or written and may lie anywhere. A sweep over the steps keeps the live
// buffers ordered by offset: O(n log n) in buffers and steps.
Status checkBufferLiveness(const fb::Program &program, const std::string &where) {
  const int numSteps = static_cast<int>(program.steps()->size());
  const uint32_t numBuffers = program.buffers()->size();
  struct Life {
    int first = 0, last = -2; // last < first: never touched
    uint64_t begin = 0, end = 0;
  };
  std::vector<Life> lives(numBuffers);
  auto touch = [&](int b, int step) {
    Life &l = lives[b];
    if (l.last < l.first) {
      l.first = l.last = step;
      return;
    }
    l.first = std::min(l.first, step);
    l.last = std::max(l.last, step);
  };
  touch(program.token_buffer(), -1);
  for (int s = 0; s < numSteps; ++s) {
    const fb::Step &step = *program.steps()->Get(s);
    for (int b : *step.inputs())
      touch(b, s);
    for (int b : *step.outputs())
      touch(b, s);
    if (step.op() == fb::OpKind::LmHead)
      touch(step.outputs()->Get(1), numSteps); // the runtime reads the ids after the step
  }
  touch(program.logits_buffer(), numSteps);
  std::vector<uint32_t> byFirst, byLast;
  for (uint32_t b = 0; b < numBuffers; ++b) {
    const fb::Buffer &buffer = *program.buffers()->Get(b);
    lives[b].begin = buffer.offset_per_token();
    lives[b].end = lives[b].begin + static_cast<uint64_t>(buffer.width()) *
                                        dtypeSize(static_cast<DType>(buffer.dtype()));
    if (lives[b].last >= lives[b].first) {
      byFirst.push_back(b);
      byLast.push_back(b);
    }
  }
  auto firstOrder = [&](uint32_t x, uint32_t y) { return lives[x].first < lives[y].first; };
  auto lastOrder = [&](uint32_t x, uint32_t y) { return lives[x].last < lives[y].last; };
  std::sort(byFirst.begin(), byFirst.end(), firstOrder);
  std::sort(byLast.begin(), byLast.end(), lastOrder);
  // Live buffers by (begin, index); pairwise disjoint, so a new one overlaps
  // one of them exactly when it overlaps its neighbour on either side.
  std::set<std::pair<uint64_t, uint32_t>> live;
  size_t nextFirst = 0, nextLast = 0;
  auto describe = [&](uint32_t b) {
    const fb::Buffer &buffer = *program.buffers()->Get(b);
    return "buffer " + str(b) + (buffer.name() ? " '" + buffer.name()->str() + "'" : "") + " [" +
           str(lives[b].begin) + ", " + str(lives[b].end) + ")";
  };
  for (int t = -1; t <= numSteps && nextFirst < byFirst.size(); ++t) {
    while (nextLast < byLast.size() && lives[byLast[nextLast]].last < t) {
      live.erase({lives[byLast[nextLast]].begin, byLast[nextLast]});
      ++nextLast;
    }
    for (; nextFirst < byFirst.size() && lives[byFirst[nextFirst]].first == t; ++nextFirst) {
      const uint32_t b = byFirst[nextFirst];
      auto next = live.lower_bound({lives[b].begin, 0});
      int other = -1;
      if (next != live.end() && next->first < lives[b].end)
        other = static_cast<int>(next->second);
      else if (next != live.begin() && lives[std::prev(next)->second].end > lives[b].begin)
        other = static_cast<int>(std::prev(next)->second);
      if (other >= 0) {
        const std::string when = t < 0 ? "before step 0"
                                 : t == numSteps
                                     ? "after the last step"
                                     : "at step " + std::to_string(t) + " (" +
                                           fb::EnumNameOpKind(program.steps()->Get(t)->op()) + ")";
        return Status::error(where + ": " + describe(b) + " and " +
                             describe(static_cast<uint32_t>(other)) +
                             " bytes per token overlap in the activation arena while both are "
                             "live (" +
                             when + "); the memory plan is corrupt, rebuild the plan");
      }
      live.insert({lives[b].begin, b});
    }
  }
  return Status::ok();
}

Status checkPrograms(const fb::Plan &plan, const std::string &name) {
  if (plan.programs() == nullptr || plan.programs()->size() == 0)
    return Status::error(name + ": metadata has no programs");
  for (uint32_t p = 0; p < plan.programs()->size(); ++p) {
    const fb::Program &program = *plan.programs()->Get(p);
    std::string where = name + ": program " + str(p);
    if (program.target() > fb::Target::MAX || program.phase() > fb::Phase::MAX)
      return Status::error(where + ": unknown target or phase");
    if (program.buffers() == nullptr || program.steps() == nullptr)
      return Status::error(where + ": has no buffers or no steps");
    uint32_t numBuffers = program.buffers()->size();
    for (uint32_t b = 0; b < numBuffers; ++b) {
      const fb::Buffer &buffer = *program.buffers()->Get(b);
      uint64_t bytes = 0, end = 0;
      if (!validDType(buffer.dtype()) || buffer.width() <= 0 ||
          __builtin_mul_overflow(static_cast<uint64_t>(buffer.width()),
                                 dtypeSize(static_cast<DType>(buffer.dtype())), &bytes) ||
          __builtin_add_overflow(buffer.offset_per_token(), bytes, &end) ||
          end > program.arena_bytes_per_token())
        return Status::error(where + ": buffer " + str(b) +
                             " has an invalid dtype or width, or lies outside the arena of " +
                             str(program.arena_bytes_per_token()) + " bytes per token");
    }
    if (program.arena_bytes_per_token() > (uint64_t(1) << 32))
      return Status::error(where + ": activation arena of " + str(program.arena_bytes_per_token()) +
                           " bytes per token is too big");
    for (int b : {program.token_buffer(), program.logits_buffer()})
      if (b < 0 || static_cast<uint32_t>(b) >= numBuffers)
        return Status::error(where + ": token or logits buffer index " + std::to_string(b) +
                             " out of range");
    if (program.buffers()->Get(program.token_buffer())->dtype() != fb::DType::I32 ||
        program.buffers()->Get(program.token_buffer())->width() != 1)
      return Status::error(where + ": the token buffer must be I32 with width 1");
    if (program.buffers()->Get(program.logits_buffer())->width() != plan.model()->vocab_size() ||
        program.buffers()->Get(program.logits_buffer())->dtype() != fb::DType::F32)
      return Status::error(where + ": the logits buffer must be F32 with width vocab_size");
    if (program.max_tokens() < 0 || (program.target() == fb::Target::Cpu && program.max_tokens()))
      return Status::error(where + ": max_tokens must be 0 for CPU programs, >= 0 for GPU ones");
    for (uint32_t s = 0; s < program.steps()->size(); ++s) {
      const fb::Step &step = *program.steps()->Get(s);
      std::string stepWhere = where + " step " + str(s);
      LLMC_RETURN_IF_ERROR(checkStep(plan, program, step, stepWhere));
      LLMC_RETURN_IF_ERROR(checkStepShapes(plan, program, step, stepWhere));
      LLMC_RETURN_IF_ERROR(checkLibraryGemm(plan, program, step, stepWhere));
      // The runtime reads LmHead's outputs as the step's result.
      if (step.op() == fb::OpKind::LmHead &&
          (s + 1 != program.steps()->size() || step.outputs()->Get(0) != program.logits_buffer()))
        return Status::error(stepWhere + ": LmHead must be the last step and write the " +
                             "program's logits buffer");
    }
    LLMC_RETURN_IF_ERROR(checkBufferAlignment(program, where));
    LLMC_RETURN_IF_ERROR(checkBufferLiveness(program, where));
  }
  return Status::ok();
}

// A synthetic tensor costs host or device memory at load but no bytes in the
// file, so a few KiB of metadata could ask for any amount: each must be used
// by a step (its shape then follows from the buffers and the model), and
// their total must be countable. What the machine can hold is checked where
// the memory is taken (usableHostMemoryBytes()).
Status checkSyntheticTensorsUsed(const fb::Plan &plan, const std::string &name) {
  if (!plan.synthetic())
    return Status::ok();
  const auto &tensors = *plan.tensors();
  std::vector<bool> used(tensors.size(), false);
  for (const fb::Program *program : *plan.programs())
    for (const fb::Step *step : *program->steps())
      if (step->weights() != nullptr)
        for (int w : *step->weights())
          used[w] = true;
  uint64_t total = 0;
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor &t = *tensors.Get(i);
    if (!used[i])
      return Status::error(name + ": synthetic tensor " + str(i) + " '" + t.name()->str() +
                           "' asks for " + str(t.size()) + " bytes (" + gib(t.size()) +
                           ") but no step uses it; a plan may generate only tensors its "
                           "programs read");
    if (__builtin_add_overflow(total, t.size(), &total))
      return Status::error(name + ": synthetic tensors ask for more than 2^64 bytes");
  }
  return Status::ok();
}

} // namespace

Status validatePlanImage(const uint8_t *data, uint64_t size, const std::string &name,
                         const PlanLoadOptions &options, const fb::Plan **meta) {
  PlanFileHeader header;
  LLMC_RETURN_IF_ERROR(checkHeader(data, size, name, options.verifyMetadataChecksum, &header));
  const uint8_t *metaBytes = data + header.metadataOffset;
  if (header.metadataSize < 8 || !fb::PlanBufferHasIdentifier(metaBytes))
    return Status::error(name + ": metadata is not an llmc plan FlatBuffer (identifier \"LLMC\")");
  flatbuffers::Verifier verifier(metaBytes, header.metadataSize,
                                 /*max_depth=*/64, /*max_tables=*/10000000);
  if (!fb::VerifyPlanBuffer(verifier))
    return Status::error(name + ": metadata FlatBuffer fails verification (corrupt plan)");
  const fb::Plan *plan = fb::GetPlan(metaBytes);
  LLMC_RETURN_IF_ERROR(checkModel(*plan, name));
  LLMC_RETURN_IF_ERROR(checkGenerationSettings(*plan, name));
  LLMC_RETURN_IF_ERROR(checkTensors(*plan, header.weightsSize, name));
  LLMC_RETURN_IF_ERROR(checkKernelModules(*plan, name));
  LLMC_RETURN_IF_ERROR(checkPrograms(*plan, name));
  LLMC_RETURN_IF_ERROR(checkSyntheticTensorsUsed(*plan, name));
  if (options.verifyWeights && header.weightsChecksum != 0 &&
      planWeightChecksum(data + header.weightsOffset, header.weightsSize) != header.weightsChecksum)
    return Status::error(name + ": weight section checksum mismatch (the file is corrupt)");
  *meta = plan;
  return Status::ok();
}

Expected<Plan> Plan::open(const std::string &path, PlanLoadOptions options) {
  LLMC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const fb::Plan *meta = nullptr;
  LLMC_RETURN_IF_ERROR(validatePlanImage(file.data(), file.size(), path, options, &meta));
  PlanFileHeader header;
  std::memcpy(&header, file.data(), sizeof(header));
  Plan plan;
  plan.path_ = path;
  plan.meta_ = meta;
  plan.weights_ = file.data() + header.weightsOffset;
  plan.metadataSize_ = header.metadataSize;
  plan.weightsSize_ = header.weightsSize;
  plan.file_ = std::move(file); // the mapping's address does not change on move
  return plan;
}

Expected<Plan> Plan::fromImage(const uint8_t *data, uint64_t size, const std::string &name,
                               PlanLoadOptions options) {
  // Page-aligned like a mapping, so tensors keep their 256-byte alignment.
  const uint64_t capacity = alignUp(std::max<uint64_t>(size, 1), 4096);
  std::unique_ptr<uint8_t, FreeImage> image(
      static_cast<uint8_t *>(std::aligned_alloc(4096, capacity)));
  if (image == nullptr)
    return Status::error(name + ": cannot allocate " + str(size) + " bytes for the plan image");
  if (size > 0)
    std::memcpy(image.get(), data, size);
  const fb::Plan *meta = nullptr;
  LLMC_RETURN_IF_ERROR(validatePlanImage(image.get(), size, name, options, &meta));
  PlanFileHeader header;
  std::memcpy(&header, image.get(), sizeof(header));
  Plan plan;
  plan.path_ = name;
  plan.meta_ = meta;
  plan.weights_ = image.get() + header.weightsOffset;
  plan.metadataSize_ = header.metadataSize;
  plan.weightsSize_ = header.weightsSize;
  plan.imageSize_ = size;
  plan.image_ = std::move(image); // the heap block does not move
  return plan;
}

const uint8_t *Plan::tensorData(uint32_t index) const {
  const fb::Tensor *t = meta_->tensors()->Get(index);
  if (t->synthetic() != nullptr)
    return nullptr;
  return weights_ + t->offset();
}

int Plan::findTensor(const std::string &name) const {
  const auto &tensors = *meta_->tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i)
    if (tensors.Get(i)->name()->str() == name)
      return static_cast<int>(i);
  return -1;
}

const fb::KernelModule *Plan::module(fb::Target target) const { return findModule(*meta_, target); }

const fb::Program *Plan::program(fb::Target target, fb::Phase phase, int64_t tokens) const {
  const fb::Program *any = nullptr, *best = nullptr;
  for (const fb::Program *p : *meta_->programs()) {
    if (p->target() != target || p->phase() != phase)
      continue;
    if (p->max_tokens() == 0 && any == nullptr)
      any = p;
    else if (p->max_tokens() >= tokens && (best == nullptr || p->max_tokens() < best->max_tokens()))
      best = p;
  }
  return best != nullptr ? best : any;
}

const fb::Program *Plan::program(fb::Target target, fb::Phase phase) const {
  for (const fb::Program *p : *meta_->programs())
    if (p->target() == target && p->phase() == phase)
      return p;
  return nullptr;
}

uint64_t syntheticWeightBytes(const fb::Plan &plan) {
  uint64_t total = 0;
  if (plan.synthetic())
    for (const fb::Tensor *t : *plan.tensors())
      total += t->size(); // cannot wrap: the loader checked the sum
  return total;
}

uint64_t usableHostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  uint64_t limit = pages > 0 && pageSize > 0
                       ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize)
                       : ~uint64_t{0};
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl;
    if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      limit = std::min<uint64_t>(limit, rl.rlim_cur);
  }
  return limit;
}

Status checkHostMemory(const std::string &name, const std::vector<MemoryDemand> &demands,
                       uint64_t limit) {
  uint64_t total = 0;
  bool overflow = false;
  std::string parts;
  for (const MemoryDemand &d : demands) {
    overflow |= __builtin_add_overflow(total, d.bytes, &total);
    parts += (parts.empty() ? "" : ", ") + d.what + " " + str(d.bytes) + " bytes";
  }
  if (!overflow && total <= limit)
    return Status::ok();
  return Status::error(name + ": needs " + (overflow ? std::string("more than 2^64") : str(total)) +
                       " bytes of host memory (" + (overflow ? "" : gib(total) + ": ") + parts +
                       ") but at most " + str(limit) + " bytes (" + gib(limit) +
                       ", physical memory or the process's memory limit) are available");
}

} // namespace llmc
