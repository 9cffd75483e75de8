#include "plan/plan.h"

#include "kernels/common/activations.h"
#include "ops/op_table.h"
#include "ops/operands.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
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
                         "); rebuild the plan with llmc >= " + kPlanFormatLlmcVersion +
                         " (llmc build)");
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
  if (!(m->rms_norm_eps() > 0.0))
    return Status::error(name + ": model.rms_norm_eps must be positive");
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

// `external`: the tensors' bytes live outside the plan (Plan::fromMetadata),
// so offsets are not checked.
Status checkTensors(const fb::Plan &plan, uint64_t weightsSize, const std::string &name,
                    bool external = false) {
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
    if (external)
      continue;
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

// --- Parameter tables: every field range-checked, named in the message. ---

std::string num(double v) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.9g", v);
  return text;
}

// "<where>: <Op>: <Table>.<field> = <value>: <what>".
struct FieldCheck {
  const std::string &where; // "plan: program 0 step 3"
  std::string op;           // "Linear"
  Status fail(const std::string &field, const std::string &value, const std::string &what) const {
    return Status::error(where + ": " + op + ": " + field + " = " + value + ": " + what);
  }
  Status fail(const std::string &field, int64_t value, const std::string &what) const {
    return fail(field, std::to_string(value), what);
  }
  Status failF(const std::string &field, double value, const std::string &what) const {
    return fail(field, num(value), what);
  }
  Status unsupported(const std::string &field, const std::string &value) const {
    return fail(field, value,
                "not run by this runtime yet (a newer llmrun may; or rebuild the plan without it)");
  }
};

bool finite(double v) { return std::isfinite(v); }

// A matrix's storage (LinearParams, LogitsParams: `table`): a known format
// and the group size it takes.
Status checkWeightFormat(fb::WeightFormat weights, int64_t groupSize, const std::string &table,
                         const FieldCheck &c) {
  if (weights > fb::WeightFormat::MAX)
    return c.fail(table + ".weights", static_cast<int64_t>(weights), "not a WeightFormat");
  if (weights == fb::WeightFormat::Q4 ? !hd::q4ValidGroupSize(groupSize)
      : weights == fb::WeightFormat::Q8 ? !hd::q8ValidGroupSize(groupSize)
                                        : groupSize != 0)
    return c.fail(table + ".group_size", groupSize,
                  weights == fb::WeightFormat::Q4 ? "must be a positive multiple of 32 for Q4 weights"
                  : weights == fb::WeightFormat::Q8
                      ? "must be 0 (per output channel) or a positive multiple of 32 for Q8 "
                        "weights"
                      : "must be 0 for Dense weights");
  return Status::ok();
}

// A norm of rows `width` wide (a Norm step's, a prologue, a final norm).
// LayerNorm (with its bias and groups) runs as a Norm step only: `normStep`.
Status checkNormParams(const fb::NormParams &n, const std::string &table, int64_t width,
                       const FieldCheck &c, bool normStep = false) {
  if (n.kind() > fb::NormKind::MAX)
    return c.fail(table + ".kind", static_cast<int64_t>(n.kind()), "not a NormKind");
  if (!(n.eps() > 0.0) || !finite(n.eps()))
    return c.failF(table + ".eps", n.eps(), "must be positive and finite");
  if (!finite(n.offset()))
    return c.failF(table + ".offset", n.offset(), "must be finite");
  if (n.group_width() < 0 || (n.group_width() > 0 && width % n.group_width() != 0))
    return c.fail(table + ".group_width", n.group_width(),
                  "must be 0 (the whole row) or divide the row width " + std::to_string(width));
  if (normStep && n.kind() == fb::NormKind::Layer)
    return Status::ok();
  if (n.kind() != fb::NormKind::Rms)
    return c.unsupported(table + ".kind", fb::EnumNameNormKind(n.kind()));
  if (n.bias())
    return c.unsupported(table + ".bias", "true");
  // Per-group (per-head) norms run as Norm steps of their own, not fused.
  if (n.group_width() != 0 && table != "NormParams")
    return c.unsupported(table + ".group_width", std::to_string(n.group_width()));
  return Status::ok();
}

Status checkRopeScaling(const fb::RopeScaling &s, int64_t rotaryDim, const FieldCheck &c) {
  const std::string t = "rope.scaling";
  if (s.kind() > fb::RopeScalingKind::MAX)
    return c.fail(t + ".kind", static_cast<int64_t>(s.kind()), "not a RopeScalingKind");
  if (!(s.factor() > 0.0) || !finite(s.factor()))
    return c.failF(t + ".factor", s.factor(), "must be positive and finite");
  if (!(s.low_freq_factor() > 0.0) || !finite(s.low_freq_factor()))
    return c.failF(t + ".low_freq_factor", s.low_freq_factor(), "must be positive and finite");
  if (!(s.high_freq_factor() > 0.0) || !finite(s.high_freq_factor()))
    return c.failF(t + ".high_freq_factor", s.high_freq_factor(), "must be positive and finite");
  if (s.original_max_positions() < 0 || s.original_max_positions() > kMaxPlanSeqLen)
    return c.fail(t + ".original_max_positions", s.original_max_positions(),
                  "must be in [0, 2^24]");
  if (!finite(s.beta_fast()) || !finite(s.beta_slow()))
    return c.failF(t + ".beta_fast", s.beta_fast(), "beta_fast and beta_slow must be finite");
  if (!(s.attention_factor() >= 0.0) || !finite(s.attention_factor()))
    return c.failF(t + ".attention_factor", s.attention_factor(),
                   "must be 0 (derived) or positive and finite");
  const bool longRope = s.kind() == fb::RopeScalingKind::LongRope;
  for (const auto &[field, list] : {std::pair{".short_factor", s.short_factor()},
                                    std::pair{".long_factor", s.long_factor()}}) {
    const int64_t size = list ? static_cast<int64_t>(list->size()) : 0;
    if (size != (longRope ? rotaryDim / 2 : 0))
      return c.fail(t + field + " length", size,
                    longRope ? "LongRope needs rotary_dim / 2 = " + std::to_string(rotaryDim / 2)
                             : std::string("only LongRope has per-pair factors"));
    if (list)
      for (float f : *list)
        if (!(f > 0.0f) || !std::isfinite(f))
          return c.failF(t + field, f, "every factor must be positive and finite");
  }
  if (s.kind() == fb::RopeScalingKind::Llama3) {
    if (s.original_max_positions() <= 0)
      return c.fail(t + ".original_max_positions", s.original_max_positions(),
                    "Llama3 scaling needs the original context length");
    if (!(s.high_freq_factor() > s.low_freq_factor()))
      return c.failF(t + ".high_freq_factor", s.high_freq_factor(),
                     "must exceed low_freq_factor " + num(s.low_freq_factor()));
  }
  if ((s.kind() == fb::RopeScalingKind::Dynamic || s.kind() == fb::RopeScalingKind::LongRope) &&
      s.original_max_positions() <= 0)
    return c.fail(t + ".original_max_positions", s.original_max_positions(),
                  std::string(fb::EnumNameRopeScalingKind(s.kind())) +
                      " scaling needs the length its frequencies change at");
  if (s.kind() == fb::RopeScalingKind::Yarn) {
    if (s.original_max_positions() <= 0)
      return c.fail(t + ".original_max_positions", s.original_max_positions(),
                    "Yarn scaling needs the original context length");
    if (!(s.beta_fast() > 0.0) || !(s.beta_slow() > 0.0))
      return c.failF(t + ".beta_fast", s.beta_fast(),
                     "Yarn needs beta_fast and beta_slow > 0, beta_slow " + num(s.beta_slow()));
  }
  switch (s.kind()) {
  case fb::RopeScalingKind::None:
  case fb::RopeScalingKind::Linear:
  case fb::RopeScalingKind::Llama3:
  case fb::RopeScalingKind::Yarn:
  case fb::RopeScalingKind::Dynamic:
  case fb::RopeScalingKind::LongRope:
    return Status::ok();
  }
  return Status::ok();
}

// A Rope step's or an Attention step's RoPE (partial rotary and interleaved
// pairs included: the CPU kernels rotate either way).
Status checkRopeParams(const fb::RopeParams &r, int64_t headDim, const FieldCheck &c) {
  if (!(r.theta() > 0.0) || !finite(r.theta()))
    return c.failF("rope.theta", r.theta(), "must be positive and finite");
  if (r.rotary_dim() <= 0 || r.rotary_dim() > headDim || r.rotary_dim() % 2 != 0)
    return c.fail("rope.rotary_dim", r.rotary_dim(),
                  "must be even, in [2, head_dim = " + std::to_string(headDim) + "]");
  if (r.scaling() != nullptr)
    LLMC_RETURN_IF_ERROR(checkRopeScaling(*r.scaling(), r.rotary_dim(), c));
  return Status::ok();
}

Status checkActivationKind(fb::ActivationKind a, const std::string &field, const FieldCheck &c) {
  if (a > fb::ActivationKind::MAX)
    return c.fail(field, static_cast<int64_t>(a), "not an ActivationKind");
  return Status::ok();
}

// Columns [column, column + features) must lie inside a buffer `width` wide.
bool inside(int64_t column, int64_t features, int64_t width) {
  return column >= 0 && features > 0 && column <= width - features;
}

Status checkStepParams(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                       const FieldCheck &c) {
  const fb::ModelInfo &m = *plan.model();
  auto width = [&](const flatbuffers::Vector<int32_t> *list, int i) {
    return program.buffers()->Get(list->Get(i))->width();
  };
  switch (step.op()) {
  case fb::OpKind::Embedding: {
    const double scale = step.params_as_EmbeddingParams()->scale();
    if (!finite(scale) || scale == 0.0)
      return c.failF("EmbeddingParams.scale", scale, "must be finite and non-zero");
    return Status::ok();
  }
  case fb::OpKind::Norm:
    return checkNormParams(*step.params_as_NormParams(), "NormParams", width(step.inputs(), 0), c,
                           /*normStep=*/true);
  case fb::OpKind::Linear: {
    const fb::LinearParams &p = *step.params_as_LinearParams();
    if (p.prologue() != nullptr)
      LLMC_RETURN_IF_ERROR(
          checkNormParams(*p.prologue(), "LinearParams.prologue", width(step.inputs(), 0), c));
    LLMC_RETURN_IF_ERROR(checkActivationKind(p.activation(), "LinearParams.activation", c));
    LLMC_RETURN_IF_ERROR(checkWeightFormat(p.weights(), p.group_size(), "LinearParams", c));
    if (!std::isfinite(p.output_scale()) || p.output_scale() == 0.0f)
      return c.failF("LinearParams.output_scale", p.output_scale(),
                     "must be finite and non-zero");
    if (p.gated() && p.activation() == fb::ActivationKind::None)
      return c.fail("LinearParams.activation", "None", "a gated linear needs an activation");
    if (!p.gated() && p.activation() != fb::ActivationKind::None)
      return c.unsupported("LinearParams.activation",
                           std::string(fb::EnumNameActivationKind(p.activation())) +
                               " without gating");
    if (p.gated() && p.accumulate())
      return c.unsupported("LinearParams.accumulate", "true (with gated)");
    if (p.gated() && p.bias())
      return c.unsupported("LinearParams.bias", "true (with gated)");
    if (p.output_scale() != 1.0f && p.gated())
      return c.unsupported("LinearParams.output_scale", num(p.output_scale()) + " (with gated)");
    return Status::ok();
  }
  case fb::OpKind::Rope: {
    const fb::RopeStepParams &p = *step.params_as_RopeStepParams();
    if (p.head_dim() != m.head_dim())
      return c.fail("RopeStepParams.head_dim", p.head_dim(),
                    "must equal the model's head_dim " + std::to_string(m.head_dim()));
    if (p.heads() <= 0 || p.heads() > m.num_heads())
      return c.fail("RopeStepParams.heads", p.heads(),
                    "must be in [1, num_heads = " + std::to_string(m.num_heads()) + "]");
    if (!inside(p.column(), checkedProduct(p.heads(), p.head_dim()), width(step.inputs(), 0)))
      return c.fail("RopeStepParams.column", p.column(),
                    "heads * head_dim features from it must lie inside the buffer's " +
                        std::to_string(width(step.inputs(), 0)) + " columns");
    if (p.rope() == nullptr)
      return c.fail("RopeStepParams.rope", "null", "a Rope step needs its RopeParams");
    return checkRopeParams(*p.rope(), p.head_dim(), c);
  }
  case fb::OpKind::Attention: {
    const fb::AttentionParams &p = *step.params_as_AttentionParams();
    if (p.layer() < 0 || p.layer() >= m.num_layers())
      return c.fail("AttentionParams.layer", p.layer(),
                    "must be in [0, num_layers = " + std::to_string(m.num_layers()) + ")");
    if (p.kv_heads() != m.num_kv_heads())
      return c.fail("AttentionParams.kv_heads", p.kv_heads(),
                    "must equal the KV cache's " + std::to_string(m.num_kv_heads()));
    if (p.head_dim() != m.head_dim())
      return c.fail("AttentionParams.head_dim", p.head_dim(),
                    "must equal the KV cache's " + std::to_string(m.head_dim()));
    if (p.heads() <= 0 || p.heads() % p.kv_heads() != 0 || p.heads() > 4096)
      return c.fail("AttentionParams.heads", p.heads(),
                    "must be a positive multiple of kv_heads " + std::to_string(p.kv_heads()));
    const int64_t qWidth = checkedProduct(p.heads(), p.head_dim()),
                  kvWidth = checkedProduct(p.kv_heads(), p.head_dim());
    const struct {
      const char *field;
      int64_t column, features;
    } columns[] = {{"AttentionParams.q_column", p.q_column(), qWidth},
                   {"AttentionParams.k_column", p.k_column(), kvWidth},
                   {"AttentionParams.v_column", p.v_column(), kvWidth}};
    for (int i = 0; i < 3; ++i)
      if (!inside(columns[i].column, columns[i].features, width(step.inputs(), i)))
        return c.fail(columns[i].field, columns[i].column,
                      std::to_string(columns[i].features) +
                          " features from it must lie inside input " + std::to_string(i) +
                          "'s " + std::to_string(width(step.inputs(), i)) + " columns");
    if (!finite(p.scale()) || !(p.scale() > 0.0))
      return c.failF("AttentionParams.scale", p.scale(), "must be positive and finite");
    if (!(p.softcap() >= 0.0) || !finite(p.softcap()))
      return c.failF("AttentionParams.softcap", p.softcap(),
                     "must be 0 (off) or positive and finite");
    if (p.window() < 0 || p.window() > INT32_MAX)
      return c.fail("AttentionParams.window", p.window(), "must be 0 (off) or in [1, 2^31)");
    if (p.rope() != nullptr)
      return checkRopeParams(*p.rope(), p.head_dim(), c);
    return Status::ok();
  }
  case fb::OpKind::Elementwise: {
    const fb::ElementwiseOp op = step.params_as_ElementwiseParams()->op();
    if (op > fb::ElementwiseOp::MAX)
      return c.fail("ElementwiseParams.op", static_cast<int64_t>(op), "not an ElementwiseOp");
    return Status::ok();
  }
  case fb::OpKind::Activation: {
    const fb::ActivationParams &p = *step.params_as_ActivationParams();
    LLMC_RETURN_IF_ERROR(checkActivationKind(p.activation(), "ActivationParams.activation", c));
    if (p.activation() == fb::ActivationKind::None)
      return c.fail("ActivationParams.activation", "None", "an Activation step needs one");
    return Status::ok();
  }
  case fb::OpKind::Logits:
  case fb::OpKind::LmHead: {
    const fb::LogitsParams &p = *step.params_as_LogitsParams();
    const bool head = step.op() == fb::OpKind::LmHead;
    if (head && p.norm() == nullptr)
      return c.fail("LogitsParams.norm", "null", "LmHead needs its final norm");
    if (p.norm() != nullptr) {
      if (!head)
        return c.unsupported("LogitsParams.norm", "set (on a Logits step; LmHead has one)");
      LLMC_RETURN_IF_ERROR(
          checkNormParams(*p.norm(), "LogitsParams.norm", width(step.inputs(), 0), c));
    }
    LLMC_RETURN_IF_ERROR(checkWeightFormat(p.weights(), p.group_size(), "LogitsParams", c));
    if (!(p.softcap() >= 0.0) || !finite(p.softcap()))
      return c.failF("LogitsParams.softcap", p.softcap(),
                     "must be 0 (off) or positive and finite");
    if (!(p.scale() > 0.0) || !finite(p.scale()))
      return c.failF("LogitsParams.scale", p.scale(),
                     "must be positive and finite (argmax of the unscaled logits)");
    // The CPU LmHead applies neither (LayerNorm heads stay Logits steps).
    if (head && p.scale() != 1.0)
      return c.unsupported("LogitsParams.scale", num(p.scale()));
    if (head && p.bias())
      return c.unsupported("LogitsParams.bias", "true");
    return Status::ok();
  }
  }
  return c.fail("op", static_cast<int64_t>(step.op()), "not an op kind");
}

// Checks one step's operands against its op kind and the buffers/tensors it names.
Status checkStep(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                 const std::string &where) {
  if (!ops::validOp(step.op()))
    return Status::error(where + ": unknown op kind " + str(static_cast<uint64_t>(step.op())));
  const ops::OpInfo &info = ops::opInfo(step.op());
  const std::string op = info.name;
  if (step.params_type() != info.params)
    return Status::error(where + ": " + op + ": params is " +
                         (step.params_type() > fb::StepParams::MAX
                              ? "union member " + str(static_cast<uint64_t>(step.params_type()))
                              : std::string(ops::paramsName(step.params_type()))) +
                         ", expected " + ops::paramsName(info.params) + " (corrupt plan)");
  if (step.params() == nullptr)
    return Status::error(where + ": " + op + ": has no " + ops::paramsName(info.params));
  auto count = [](const auto *v) { return v == nullptr ? 0 : static_cast<int>(v->size()); };
  if (count(step.inputs()) < info.minInputs || count(step.inputs()) > info.maxInputs ||
      count(step.outputs()) != info.outputs || count(step.weights()) < info.minWeights ||
      count(step.weights()) > info.maxWeights)
    return Status::error(where + ": " + op + " has " + std::to_string(count(step.inputs())) +
                         " inputs, " + std::to_string(count(step.outputs())) + " outputs, " +
                         std::to_string(count(step.weights())) + " weights (the kind takes " +
                         std::to_string(info.minInputs) + ".." + std::to_string(info.maxInputs) +
                         ", " + std::to_string(info.outputs) + ", " +
                         std::to_string(info.minWeights) + ".." +
                         std::to_string(info.maxWeights) + ")");
  uint32_t numBuffers = program.buffers()->size();
  for (const auto *list : {step.inputs(), step.outputs()})
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
  LLMC_RETURN_IF_ERROR(checkStepParams(plan, program, step, FieldCheck{where, op}));
  if (count(step.inputs()) != ops::expectedInputs(step) ||
      count(step.weights()) != ops::expectedWeights(step))
    return Status::error(where + ": " + op + " has " + std::to_string(count(step.inputs())) +
                         " inputs and " + std::to_string(count(step.weights())) +
                         " weights; its " + ops::paramsName(info.params) + " ask for " +
                         std::to_string(ops::expectedInputs(step)) + " and " +
                         std::to_string(ops::expectedWeights(step)));
  if (info.inPlace && step.inputs()->Get(0) != step.outputs()->Get(0))
    return Status::error(where + ": " + op + " works in place: its output must be its input");
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

// --- Shapes: buffer widths and weight shapes fit the op, so that the
// executors index without checks. Per kind: engine.fbs "Operand conventions". ---

struct ShapeCheck {
  const fb::Plan &plan;
  const fb::Program &program;
  const fb::Step &step;
  std::string prefix; // "<where>: <Op>: "

  Status fail(const std::string &what) const { return Status::error(prefix + what); }
  const fb::Buffer &buffer(int b) const { return *program.buffers()->Get(b); }
  int64_t inWidth(int i) const { return buffer(step.inputs()->Get(i)).width(); }
  int64_t outWidth(int i = 0) const { return buffer(step.outputs()->Get(i)).width(); }
  const fb::Tensor &weight(int i) const { return *plan.tensors()->Get(step.weights()->Get(i)); }
  bool sameBuffer(int input, int output) const {
    return step.inputs()->Get(input) == step.outputs()->Get(output);
  }

  // A float vector [size] (norm gamma/beta, biases: biases must be F32).
  Status vector(int i, int64_t size, const char *what, bool f32 = false) const {
    const fb::Tensor &t = weight(i);
    if ((f32 ? t.dtype() != fb::DType::F32 : !isFloat(t.dtype())) || t.shape()->size() != 1 ||
        t.shape()->Get(0) != size)
      return fail(std::string(what) + " '" + t.name()->str() + "' must be " +
                  (f32 ? "F32" : "a float") + " [" + std::to_string(size) + "], got " +
                  describeTensor(t));
    return Status::ok();
  }
  // A float matrix [rows, cols].
  Status matrix(int i, int64_t rows, int64_t cols, const char *what) const {
    const fb::Tensor &t = weight(i);
    if (!isFloat(t.dtype()) || t.shape()->size() != 2 || t.shape()->Get(0) != rows ||
        t.shape()->Get(1) != cols)
      return fail(std::string(what) + " '" + t.name()->str() + "' must be a float [" +
                  std::to_string(rows) + ", " + std::to_string(cols) + "], got " +
                  describeTensor(t));
    return Status::ok();
  }
  // The norm weights (gamma, beta) from index `first`, rows `width` wide:
  // one value per feature, or with groups one per feature of a group (shared
  // by every group) when gamma says so.
  Status norm(const fb::NormParams &n, int first, int64_t width) const {
    int64_t size = n.group_width() > 0 ? n.group_width() : width;
    const fb::Tensor &gamma = weight(first);
    if (n.kind() == fb::NormKind::Layer && gamma.shape()->size() == 1 &&
        gamma.shape()->Get(0) == width)
      size = width;
    LLMC_RETURN_IF_ERROR(vector(first, size, "norm weight"));
    return n.bias() ? vector(first + 1, size, "norm bias") : Status::ok();
  }
};

// The int4 parts of an [n, k] matrix in groups of `group` (kernels/common/q4_layout.h).
Status checkQ4Matrix(const ShapeCheck &c, int first, int64_t n, int64_t k, int64_t group) {
  const int64_t groups = hd::q4NumGroups(k, group);
  const struct {
    fb::DType dtype;
    int64_t cols;
    const char *what;
  } parts[] = {{fb::DType::I32, hd::q4WordsPerRow(k), "packed int4 words"},
               {fb::DType::F16, groups, "scales"},
               {fb::DType::F16, groups, "zeros"}};
  for (int i = 0; i < 3; ++i) {
    const fb::Tensor &t = c.weight(first + i);
    if (t.dtype() != parts[i].dtype || t.shape()->size() != 2 || t.shape()->Get(0) != n ||
        t.shape()->Get(1) != parts[i].cols)
      return c.fail("tensor '" + t.name()->str() + "' (" + parts[i].what + ") must be " +
                    fb::EnumNameDType(parts[i].dtype) + " [" + std::to_string(n) + ", " +
                    std::to_string(parts[i].cols) + "] for K = " + std::to_string(k) +
                    " in groups of " + std::to_string(group) + " (" + std::to_string(groups) +
                    " groups), got " + describeTensor(t));
  }
  return Status::ok();
}

// The int8 parts of an [n, k] matrix, per output channel (group 0) or in
// groups of `group` (kernels/common/q8_layout.h): int8 rows padded to 32
// bytes, one F32 or F16 scale per row and group.
Status checkQ8Matrix(const ShapeCheck &c, int first, int64_t n, int64_t k, int64_t group) {
  const int64_t groups = hd::q8NumGroups(k, group);
  const std::string grouping =
      group > 0 ? "in groups of " + std::to_string(group) + " (" + std::to_string(groups) + " groups)"
                : std::string("per output channel");
  const fb::Tensor &q = c.weight(first);
  if (q.dtype() != fb::DType::I8 || q.shape()->size() != 2 || q.shape()->Get(0) != n ||
      q.shape()->Get(1) != hd::q8RowBytes(k))
    return c.fail("tensor '" + q.name()->str() + "' (int8 weights) must be I8 [" +
                  std::to_string(n) + ", " + std::to_string(hd::q8RowBytes(k)) + "] for K = " +
                  std::to_string(k) + ", got " + describeTensor(q));
  const fb::Tensor &s = c.weight(first + 1);
  if ((s.dtype() != fb::DType::F32 && s.dtype() != fb::DType::F16) || s.shape()->size() != 2 ||
      s.shape()->Get(0) != n || s.shape()->Get(1) != groups)
    return c.fail("tensor '" + s.name()->str() + "' (int8 scales) must be F32 or F16 [" +
                  std::to_string(n) + ", " + std::to_string(groups) + "] for K = " +
                  std::to_string(k) + " " + grouping + ", got " + describeTensor(s));
  return Status::ok();
}

Status checkLinearShapes(const ShapeCheck &c) {
  const fb::LinearParams &p = *c.step.params_as_LinearParams();
  const ops::LinearOperands o = ops::linearOperands(p);
  const int64_t k = c.inWidth(0), n = c.outWidth() * (p.gated() ? 2 : 1);
  if (c.sameBuffer(0, 0))
    return c.fail("input and output must be different buffers");
  if (p.prologue() != nullptr)
    LLMC_RETURN_IF_ERROR(c.norm(*p.prologue(), o.normGamma, k));
  switch (p.weights()) {
  case fb::WeightFormat::Dense:
    LLMC_RETURN_IF_ERROR(c.matrix(o.matrix, n, k,
                                  p.gated() ? "weight [2N, K] (gate rows, then up)"
                                            : "weight [N, K]"));
    break;
  case fb::WeightFormat::Q4:
    LLMC_RETURN_IF_ERROR(checkQ4Matrix(c, o.matrix, n, k, p.group_size()));
    break;
  case fb::WeightFormat::Q8:
    LLMC_RETURN_IF_ERROR(checkQ8Matrix(c, o.matrix, n, k, p.group_size()));
    break;
  }
  return o.bias >= 0 ? c.vector(o.bias, n, "bias", p.weights() != fb::WeightFormat::Dense)
                     : Status::ok();
}

Status checkLogitsShapes(const ShapeCheck &c) {
  const fb::LogitsParams &p = *c.step.params_as_LogitsParams();
  const int64_t hidden = c.inWidth(0), vocab = c.plan.model()->vocab_size();
  if (p.norm() != nullptr)
    LLMC_RETURN_IF_ERROR(c.norm(*p.norm(), 0, hidden));
  switch (p.weights()) {
  case fb::WeightFormat::Dense:
    LLMC_RETURN_IF_ERROR(c.matrix(ops::logitsMatrix(p), vocab, hidden, "weight [vocab_size, H]"));
    break;
  case fb::WeightFormat::Q4:
    LLMC_RETURN_IF_ERROR(checkQ4Matrix(c, ops::logitsMatrix(p), vocab, hidden, p.group_size()));
    break;
  case fb::WeightFormat::Q8:
    LLMC_RETURN_IF_ERROR(checkQ8Matrix(c, ops::logitsMatrix(p), vocab, hidden, p.group_size()));
    break;
  }
  if (p.bias())
    LLMC_RETURN_IF_ERROR(c.vector(ops::logitsBias(p), vocab, "bias", /*f32=*/true));
  if (c.outWidth(0) != vocab)
    return c.fail("the logits output must be [T, vocab_size]");
  if (c.step.op() == fb::OpKind::LmHead) {
    const fb::Buffer &ids = c.buffer(c.step.outputs()->Get(1));
    if (ids.dtype() != fb::DType::I32 || ids.width() != 1)
      return c.fail("the ids output must be I32 with width 1");
    if (c.sameBuffer(0, 0) || c.sameBuffer(0, 1) ||
        c.step.outputs()->Get(0) == c.step.outputs()->Get(1))
      return c.fail("input and outputs must be different buffers");
  }
  return Status::ok();
}

Status checkShapesOfKind(const ShapeCheck &c) {
  const fb::Step &step = c.step;
  const fb::ModelInfo &m = *c.plan.model();
  switch (step.op()) {
  case fb::OpKind::Embedding: {
    const fb::Tensor &table = c.weight(0);
    if (!isFloat(table.dtype()) || table.shape()->size() != 2 ||
        table.shape()->Get(0) != m.vocab_size())
      return c.fail("weight must be a float [vocab_size, hidden]");
    if (c.inWidth(0) != 1 || c.outWidth() != table.shape()->Get(1))
      return c.fail("buffer widths do not match the weight shape");
    return Status::ok();
  }
  case fb::OpKind::Norm:
    if (c.outWidth() != c.inWidth(0))
      return c.fail("input and output must have the same width");
    return c.norm(*step.params_as_NormParams(), 0, c.inWidth(0));
  case fb::OpKind::Linear:
    return checkLinearShapes(c);
  case fb::OpKind::Rope:
    return Status::ok(); // columns: checkStepParams; in place: checkStep
  case fb::OpKind::Attention: {
    const fb::AttentionParams &p = *step.params_as_AttentionParams();
    if (c.outWidth() != checkedProduct(p.heads(), p.head_dim()))
      return c.fail("the output width must be heads * head_dim");
    for (int i = 0; i < 3; ++i)
      if (c.sameBuffer(i, 0))
        return c.fail("output must not alias an input");
    return Status::ok();
  }
  case fb::OpKind::Elementwise:
    if (c.inWidth(0) != c.outWidth() || c.inWidth(1) != c.outWidth())
      return c.fail("inputs and output must have the same width");
    return Status::ok();
  case fb::OpKind::Activation:
    for (int i = 0; i < static_cast<int>(step.inputs()->size()); ++i)
      if (c.inWidth(i) != c.outWidth())
        return c.fail("inputs and output must have the same width");
    return Status::ok();
  case fb::OpKind::Logits:
  case fb::OpKind::LmHead:
    return checkLogitsShapes(c);
  }
  return c.fail("unknown op");
}

// Dtypes of the buffers, then the kind's shapes.
Status checkStepShapes(const fb::Plan &plan, const fb::Program &program, const fb::Step &step,
                       const std::string &where) {
  const ShapeCheck c{plan, program, step, where + ": " + ops::opName(step.op()) + ": "};
  // Activations are F32; GPU programs may keep them in BF16 (their kernels are
  // specialized for the dtypes). Token ids are I32, logits F32 everywhere.
  const bool gpu = program.target() != fb::Target::Cpu;
  auto activation = [&](fb::DType t) {
    return t == fb::DType::F32 || (gpu && t == fb::DType::BF16);
  };
  for (int i = 0; i < static_cast<int>(step.inputs()->size()); ++i) {
    const bool tokens = step.op() == fb::OpKind::Embedding;
    const fb::DType t = c.buffer(step.inputs()->Get(i)).dtype();
    if (tokens ? t != fb::DType::I32 : !activation(t))
      return c.fail("input " + std::to_string(i) + " has dtype " + fb::EnumNameDType(t) +
                    ", expected " +
                    (tokens ? "I32"
                     : gpu  ? "F32 or BF16"
                            : "F32"));
  }
  const bool logits = step.op() == fb::OpKind::Logits || step.op() == fb::OpKind::LmHead;
  const fb::DType out = c.buffer(step.outputs()->Get(0)).dtype();
  if (logits ? out != fb::DType::F32 : !activation(out))
    return c.fail(logits ? "output buffer must be F32"
                  : gpu  ? "output buffer must be F32 or BF16"
                         : "output buffer must be F32");
  return checkShapesOfKind(c);
}
} // namespace

std::vector<int32_t> attentionWindows(const fb::Plan &plan) {
  std::vector<int32_t> windows(static_cast<size_t>(std::max<int64_t>(0, plan.model()->num_layers())), 0);
  if (plan.programs() == nullptr || plan.programs()->size() == 0)
    return windows;
  for (const fb::Step *step : *plan.programs()->Get(0)->steps()) {
    const fb::AttentionParams *a = step->params_as_AttentionParams();
    if (a == nullptr)
      continue;
    const int64_t layer = a->layer(); // in range: the loader checked it
    if (layer >= 0 && static_cast<size_t>(layer) < windows.size())
      windows[static_cast<size_t>(layer)] = static_cast<int32_t>(a->window());
  }
  return windows;
}

bool isSyntheticQ4(fb::SyntheticKind kind) {
  return kind == fb::SyntheticKind::Q4Weight || kind == fb::SyntheticKind::Q4Scales ||
         kind == fb::SyntheticKind::Q4Zeros;
}

namespace {

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
  const fb::LinearParams *p = step.params_as_LinearParams();
  const bool plain = p != nullptr && p->prologue() == nullptr && !p->gated() &&
                     p->activation() == fb::ActivationKind::None &&
                     p->weights() == fb::WeightFormat::Dense &&
                     (p->output_scale() == 1.0f || !p->bias());
  if (program.target() == fb::Target::Cpu || program.max_tokens() != 0 || !plain)
    return fail(std::string("set on a ") + ops::opName(step.op()) + (p && !plain ? " (fused)" : "") +
                " step of a " + fb::EnumNameTarget(program.target()) +
                " program with max_tokens " + std::to_string(program.max_tokens()) +
                "; only plain Linear steps (dense, no prologue or activation, no output_scale "
                "beside a bias) of GPU programs for any T (max_tokens 0) may have one");
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
  const float beta = p->accumulate() ? 1.0f : 0.0f;
  if (g->beta() != beta)
    return fail("beta = " + std::to_string(g->beta()) + ", expected " + std::to_string(beta) +
                " (LinearParams.accumulate)");
  if (g->alpha() != p->output_scale())
    return fail("alpha = " + std::to_string(g->alpha()) + ", expected " +
                std::to_string(p->output_scale()) + " (LinearParams.output_scale)");
  const bool bias = p->bias();
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
                                           ops::opName(program.steps()->Get(t)->op()) + ")";
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

Expected<Plan> Plan::fromMetadata(const uint8_t *data, uint64_t size, const std::string &name) {
  std::unique_ptr<uint8_t, FreeImage> image(
      static_cast<uint8_t *>(std::aligned_alloc(4096, alignUp(std::max<uint64_t>(size, 1), 4096))));
  if (image == nullptr)
    return Status::error(name + ": cannot allocate " + str(size) + " bytes for the metadata");
  if (size > 0)
    std::memcpy(image.get(), data, size);
  if (size < 8 || !fb::PlanBufferHasIdentifier(image.get()))
    return Status::error(name + ": metadata is not an llmc plan FlatBuffer (identifier \"LLMC\")");
  flatbuffers::Verifier verifier(image.get(), size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!fb::VerifyPlanBuffer(verifier))
    return Status::error(name + ": metadata FlatBuffer fails verification");
  const fb::Plan *meta = fb::GetPlan(image.get());
  if (meta->synthetic())
    return Status::error(name + ": a plan from metadata cannot have synthetic weights");
  LLMC_RETURN_IF_ERROR(checkModel(*meta, name));
  LLMC_RETURN_IF_ERROR(checkGenerationSettings(*meta, name));
  LLMC_RETURN_IF_ERROR(checkTensors(*meta, 0, name, /*external=*/true));
  LLMC_RETURN_IF_ERROR(checkKernelModules(*meta, name));
  LLMC_RETURN_IF_ERROR(checkPrograms(*meta, name));
  Plan plan;
  plan.path_ = name;
  plan.meta_ = meta;
  plan.metadataSize_ = size;
  plan.imageSize_ = size;
  plan.image_ = std::move(image);
  return plan;
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
  if (t->synthetic() != nullptr || weights_ == nullptr)
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
