#include "cuda/nvrtc_compiler.h"

#include "cuda/kernel_headers.h"
#include "support/thread_pool.h"

#include <nvJitLink.h>
#include <nvrtc.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace llmc::cuda {
namespace {

namespace fs = std::filesystem;

// One checking macro for NVRTC calls: names the call, the kernel and file:line.
#define LLMC_NVRTC(call, kernel)                                                                   \
  do {                                                                                             \
    nvrtcResult llmcResult_ = (call);                                                              \
    if (llmcResult_ != NVRTC_SUCCESS)                                                              \
      return Status::error(std::string("nvrtc: ") + #call + " failed for kernel '" + (kernel) +    \
                           "': " + nvrtcGetErrorString(llmcResult_) + " (" + __FILE__ + ":" +      \
                           std::to_string(__LINE__) + ")");                                        \
  } while (0)

std::vector<std::string> nvrtcOptions(fb::Target target) {
  if (target == fb::Target::Sm90a)
    return {"--std=c++17", "--gpu-architecture=sm_90a", "--relocatable-device-code=true",
            "--ptxas-options=-v"};
  return {"--std=c++17", "--gpu-architecture=compute_80"};
}

const char *targetName(fb::Target target) { return target == fb::Target::Sm90a ? "sm_90a" : "ptx"; }

// SHA-256 (OpenSSL libcrypto) as 64 hex digits.
std::string sha256Hex(const std::string &data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char *>(data.data()), data.size(), digest);
  static const char *hex = "0123456789abcdef";
  std::string text(2 * SHA256_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    text[2 * i] = hex[digest[i] >> 4];
    text[2 * i + 1] = hex[digest[i] & 15];
  }
  return text;
}

// SHA-256 over every embedded header's name and text, once.
const std::string &headersDigest() {
  static const std::string digest = [] {
    std::string all;
    for (const EmbeddedHeader &header : kernelHeaders())
      all += std::to_string(std::strlen(header.name)) + ":" + header.name + "\n" +
             std::to_string(std::strlen(header.text)) + ":" + header.text + "\n";
    return sha256Hex(all);
  }();
  return digest;
}

// Everything a compilation depends on: the NVRTC version, the target, the
// options, the headers (by digest) and the kernel's name and full source.
// Its SHA-256 is the cache key; the entry stores it whole, so a hit is
// checked byte for byte (a collision or a stray file recompiles).
std::string cacheMaterial(const KernelInstance &kernel, fb::Target target) {
  std::string material =
      "llmc-kernel-cache-v2\n" + nvrtcVersionString() + "\n" + targetName(target);
  for (const std::string &o : nvrtcOptions(target))
    material += "\n" + o;
  material += "\nheaders " + headersDigest() + "\n" + kernel.name + "\n" +
              std::to_string(kernel.source.size()) + "\n" + kernel.source;
  return material;
}

bool readFile(const fs::path &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return static_cast<bool>(in) || in.eof();
}

// Writes atomically (a temporary name, then rename), so concurrent builds
// never see half a file. Failures only cost a recompilation next time.
void writeFileAtomic(const fs::path &path, const std::string &data) {
  std::ostringstream tmpName;
  tmpName << path.string() << ".tmp." << ::getpid() << "." << std::this_thread::get_id();
  {
    std::ofstream out(tmpName.str(), std::ios::binary | std::ios::trunc);
    if (!out)
      return;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out)
      return;
  }
  std::error_code error;
  fs::rename(tmpName.str(), path, error);
  if (error)
    fs::remove(tmpName.str(), error);
}

Expected<CompiledKernel> runNvrtc(const KernelInstance &kernel, fb::Target target) {
  const auto &headers = kernelHeaders();
  std::vector<const char *> names, texts;
  for (const EmbeddedHeader &h : headers) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  nvrtcProgram program = nullptr;
  std::string file = kernel.name + ".cu";
  LLMC_NVRTC(nvrtcCreateProgram(&program, kernel.source.c_str(), file.c_str(),
                                static_cast<int>(names.size()), texts.data(), names.data()),
             kernel.name);
  struct Destroy {
    nvrtcProgram *p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&program};
  std::vector<std::string> options = nvrtcOptions(target);
  std::vector<const char *> optionPointers;
  for (const std::string &o : options)
    optionPointers.push_back(o.c_str());
  nvrtcResult result =
      nvrtcCompileProgram(program, static_cast<int>(optionPointers.size()), optionPointers.data());
  size_t logSize = 0;
  LLMC_NVRTC(nvrtcGetProgramLogSize(program, &logSize), kernel.name);
  CompiledKernel compiled;
  compiled.name = kernel.name;
  compiled.log.assign(logSize, '\0');
  if (logSize > 0)
    LLMC_NVRTC(nvrtcGetProgramLog(program, &compiled.log[0]), kernel.name);
  while (!compiled.log.empty() && (compiled.log.back() == '\0' || compiled.log.back() == '\n'))
    compiled.log.pop_back();
  if (result != NVRTC_SUCCESS)
    return Status::error("nvrtc: kernel '" + kernel.name + "' failed to compile for " +
                         targetName(target) + " (" + nvrtcGetErrorString(result) + "):\n" +
                         compiled.log);
  size_t size = 0;
  if (target == fb::Target::Sm90a) {
    LLMC_NVRTC(nvrtcGetCUBINSize(program, &size), kernel.name);
    compiled.image.resize(size);
    LLMC_NVRTC(nvrtcGetCUBIN(program, reinterpret_cast<char *>(compiled.image.data())),
               kernel.name);
  } else {
    LLMC_NVRTC(nvrtcGetPTXSize(program, &size), kernel.name);
    compiled.image.resize(size);
    LLMC_NVRTC(nvrtcGetPTX(program, reinterpret_cast<char *>(compiled.image.data())), kernel.name);
    while (!compiled.image.empty() && compiled.image.back() == 0)
      compiled.image.pop_back();
  }
  compiled.usage = parsePtxasReport(compiled.log, kernel.name);
  return compiled;
}

int numberAfter(const std::string &text, size_t from) {
  while (from < text.size() && !std::isdigit(static_cast<unsigned char>(text[from])))
    ++from;
  return from < text.size() ? std::atoi(text.c_str() + from) : -1;
}

// --- PTX merging ---------------------------------------------------------

// A top-level PTX statement: a directive, a declaration or a function.
struct PtxStatement {
  std::string text;
  std::string name; // declared symbol ("" for .version/.target/.address_size)
  bool header = false;
  bool visible = false;
  bool externFunction = false;
};

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool hasToken(const std::string &text, const std::string &token) {
  size_t at = text.find(token);
  while (at != std::string::npos) {
    size_t end = at + token.size();
    if (end >= text.size() || !isIdentChar(text[end]))
      return true;
    at = text.find(token, end);
  }
  return false;
}

std::string identifierAt(const std::string &text, size_t at) {
  size_t end = at;
  while (end < text.size() && (isIdentChar(text[end]) || (end == at && text[end] == '%')))
    ++end;
  return text.substr(at, end - at);
}

// The name a statement declares.
std::string declaredName(const std::string &text) {
  for (const char *keyword : {".entry", ".func"}) {
    size_t at = text.find(keyword);
    if (at == std::string::npos || !hasToken(text, keyword))
      continue;
    at += std::strlen(keyword);
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
    if (at < text.size() && text[at] == '(') { // a return parameter list
      int depth = 0;
      for (; at < text.size(); ++at) {
        depth += text[at] == '(' ? 1 : text[at] == ')' ? -1 : 0;
        if (depth == 0) {
          ++at;
          break;
        }
      }
      while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
        ++at;
    }
    return identifierAt(text, at);
  }
  // A variable: the last identifier before its size, initializer or ';'.
  size_t end = text.find_first_of("[=;");
  std::string head = text.substr(0, end);
  size_t last = head.find_last_not_of(" \t\n");
  if (last == std::string::npos)
    return "";
  size_t begin = last + 1;
  while (begin > 0 && isIdentChar(head[begin - 1]))
    --begin;
  return head.substr(begin, last + 1 - begin);
}

std::vector<PtxStatement> splitPtx(const std::string &module) {
  std::vector<PtxStatement> statements;
  std::istringstream in(module);
  std::string line, current;
  int depth = 0;
  bool sawBrace = false;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (current.empty()) {
      if (t.empty() || t.rfind("//", 0) == 0)
        continue;
      if (t.rfind(".version", 0) == 0 || t.rfind(".target", 0) == 0 ||
          t.rfind(".address_size", 0) == 0) {
        statements.push_back({t, "", true, false, false});
        continue;
      }
    }
    current += line + "\n";
    std::string code = line.substr(0, line.find("//"));
    for (char c : code) {
      depth += c == '{' ? 1 : c == '}' ? -1 : 0;
      sawBrace |= c == '{';
    }
    bool done = depth == 0 &&
                (sawBrace ? (t.back() == '}' || t.back() == ';') : (!t.empty() && t.back() == ';'));
    if (done) {
      PtxStatement s;
      s.text = current;
      s.name = declaredName(current);
      s.visible = hasToken(current, ".visible");
      s.externFunction = hasToken(current, ".extern") && hasToken(current, ".func");
      statements.push_back(std::move(s));
      current.clear();
      sawBrace = false;
    }
  }
  if (!trim(current).empty())
    statements.push_back({current, declaredName(current), false, false, false});
  return statements;
}

// Replaces whole identifiers of `text` found in `renames`.
std::string renameIdentifiers(const std::string &text,
                              const std::map<std::string, std::string> &renames) {
  if (renames.empty())
    return text;
  std::string out;
  out.reserve(text.size() + 64);
  size_t i = 0;
  while (i < text.size()) {
    if (isIdentChar(text[i]) && (i == 0 || (!isIdentChar(text[i - 1]) && text[i - 1] != '%'))) {
      size_t end = i;
      while (end < text.size() && isIdentChar(text[end]))
        ++end;
      std::string word = text.substr(i, end - i);
      auto it = renames.find(word);
      out += it == renames.end() ? word : it->second;
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
}

} // namespace

std::string defaultCacheDir() {
  if (const char *dir = std::getenv("LLMC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/llmc";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/llmc";
  return "";
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

int nvrtcVersionNumber() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return 1000 * major + 10 * minor;
}

ResourceUsage parsePtxasReport(const std::string &log, const std::string &kernel) {
  ResourceUsage usage;
  size_t at = log.find("Compiling entry function '" + kernel + "'");
  if (at == std::string::npos)
    return usage;
  size_t next = log.find("Compiling entry function '", at + 1);
  std::string section = log.substr(at, next == std::string::npos ? std::string::npos : next - at);
  if (size_t p = section.find("bytes stack frame"); p != std::string::npos) {
    size_t lineStart = section.rfind('\n', p);
    usage.stackBytes = numberAfter(section, lineStart == std::string::npos ? 0 : lineStart);
  }
  if (size_t p = section.find("bytes spill stores"); p != std::string::npos)
    usage.spillStoreBytes = numberAfter(section, section.rfind(',', p) + 1);
  if (size_t p = section.find("bytes spill loads"); p != std::string::npos)
    usage.spillLoadBytes = numberAfter(section, section.rfind(',', p) + 1);
  if (size_t p = section.find("Used "); p != std::string::npos)
    usage.registers = numberAfter(section, p);
  return usage;
}

namespace {

// One cache entry: <key>.cubin or .ptx (the image), <key>.log, and
// <key>.src, written last: the material the key hashes, then the SHA-256 of
// the image and of the log. An entry is used only when .src matches the
// material exactly and both digests match their files.
struct CacheEntry {
  fs::path image, log, source;
};

CacheEntry cacheEntry(const std::string &cacheDir, const std::string &key, fb::Target target) {
  fs::path base = fs::path(cacheDir) / key;
  return {base.string() + (target == fb::Target::Sm90a ? ".cubin" : ".ptx"),
          base.string() + ".log", base.string() + ".src"};
}

std::string entryTrailer(const std::string &image, const std::string &log) {
  return "\nimage " + sha256Hex(image) + "\nlog " + sha256Hex(log) + "\n";
}

std::optional<CompiledKernel> readCacheEntry(const CacheEntry &entry, const std::string &material,
                                             const std::string &name) {
  std::string source, image, log;
  if (!readFile(entry.source, source) || !readFile(entry.image, image) ||
      !readFile(entry.log, log) || image.empty())
    return std::nullopt;
  if (source != material + entryTrailer(image, log))
    return std::nullopt; // another kernel's entry under this key, or a corrupt file
  CompiledKernel cached;
  cached.name = name;
  cached.image.assign(image.begin(), image.end());
  cached.log = std::move(log);
  cached.usage = parsePtxasReport(cached.log, name);
  cached.fromCache = true;
  return cached;
}

void writeCacheEntry(const CacheEntry &entry, const std::string &material,
                     const CompiledKernel &compiled) {
  std::error_code error;
  fs::create_directories(entry.image.parent_path(), error);
  const std::string image(compiled.image.begin(), compiled.image.end());
  writeFileAtomic(entry.log, compiled.log);
  writeFileAtomic(entry.image, image);
  writeFileAtomic(entry.source, material + entryTrailer(image, compiled.log));
}

} // namespace

Expected<CompiledKernel> compileKernel(const KernelInstance &kernel, fb::Target target,
                                       const std::string &cacheDir) {
  if (target != fb::Target::Sm90a && target != fb::Target::Ptx)
    return Status::error("kernel '" + kernel.name + "': target " + fb::EnumNameTarget(target) +
                         " is not a GPU target");
  if (cacheDir.empty() || cacheDir == "-")
    return runNvrtc(kernel, target);
  const std::string material = cacheMaterial(kernel, target);
  const CacheEntry entry = cacheEntry(cacheDir, sha256Hex(material), target);
  if (auto cached = readCacheEntry(entry, material, kernel.name))
    return std::move(*cached);
  LLMC_ASSIGN_OR_RETURN(CompiledKernel compiled, runNvrtc(kernel, target));
  writeCacheEntry(entry, material, compiled);
  return compiled;
}

Expected<std::vector<CompiledKernel>> compileKernels(const std::vector<KernelInstance> &kernels,
                                                     fb::Target target,
                                                     const CompileOptions &options) {
  std::string cacheDir = options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
  std::vector<Expected<CompiledKernel>> results(kernels.size(),
                                                Status::error("internal: not compiled"));
  std::mutex progressMutex;
  size_t done = 0;
  ThreadPool pool(options.threads);
  pool.parallelFor(
      static_cast<int64_t>(kernels.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          results[i] = compileKernel(kernels[i], target, cacheDir);
          std::lock_guard<std::mutex> lock(progressMutex);
          ++done;
          if (options.progress)
            options.progress(done, kernels.size());
        }
      },
      1);
  std::vector<CompiledKernel> compiled;
  compiled.reserve(kernels.size());
  for (auto &result : results) {
    if (!result)
      return result.status();
    compiled.push_back(std::move(*result));
  }
  return compiled;
}

Expected<std::string> mergePtx(const std::vector<std::string> &modules) {
  std::string headerText;
  std::string body;
  std::set<std::string> visibleNames, externFunctions;
  for (size_t m = 0; m < modules.size(); ++m) {
    std::vector<PtxStatement> statements = splitPtx(modules[m]);
    // Module-local symbols get a per-module suffix, so that helpers (and the
    // math library's tables) of different compilations never collide.
    std::map<std::string, std::string> renames;
    for (const PtxStatement &s : statements)
      if (!s.header && !s.visible && !s.externFunction && !s.name.empty())
        renames[s.name] = s.name + "_llmc" + std::to_string(m);
    std::string header;
    for (const PtxStatement &s : statements) {
      if (s.header) {
        header += s.text + "\n";
        continue;
      }
      if (s.visible && !visibleNames.insert(s.name).second)
        return Status::error("merging PTX: '" + s.name + "' is defined by two kernels");
      if (s.externFunction && !externFunctions.insert(s.text).second)
        continue;
      body += renameIdentifiers(s.text, renames) + "\n";
    }
    if (m == 0)
      headerText = header;
    else if (header != headerText)
      return Status::error("merging PTX: module " + std::to_string(m) +
                           " has a different .version/.target header:\n" + header + "expected:\n" +
                           headerText);
  }
  return "// llmc: " + std::to_string(modules.size()) + " kernels, merged\n" + headerText + "\n" +
         body;
}

Expected<std::vector<uint8_t>> linkModule(const std::vector<CompiledKernel> &kernels,
                                          fb::Target target) {
  if (kernels.empty())
    return Status::error("linking a module for " + std::string(targetName(target)) +
                         ": no kernels");
  if (target == fb::Target::Ptx) {
    std::vector<std::string> texts;
    for (const CompiledKernel &k : kernels)
      texts.emplace_back(k.image.begin(), k.image.end());
    LLMC_ASSIGN_OR_RETURN(std::string merged, mergePtx(texts));
    std::vector<uint8_t> image(merged.begin(), merged.end());
    image.push_back(0);
    return image;
  }
  nvJitLinkHandle handle = nullptr;
  const char *options[] = {"-arch=sm_90a"};
  if (nvJitLinkCreate(&handle, 1, options) != NVJITLINK_SUCCESS)
    return Status::error("nvJitLink: nvJitLinkCreate(-arch=sm_90a) failed");
  struct Destroy {
    nvJitLinkHandle *h;
    ~Destroy() { nvJitLinkDestroy(h); }
  } destroy{&handle};
  auto errorLog = [&]() {
    size_t size = 0;
    nvJitLinkGetErrorLogSize(handle, &size);
    std::string log(size, '\0');
    if (size > 0)
      nvJitLinkGetErrorLog(handle, &log[0]);
    return log;
  };
  for (const CompiledKernel &k : kernels)
    if (nvJitLinkAddData(handle, NVJITLINK_INPUT_CUBIN, k.image.data(), k.image.size(),
                         k.name.c_str()) != NVJITLINK_SUCCESS)
      return Status::error("nvJitLink: adding kernel '" + k.name + "' failed: " + errorLog());
  if (nvJitLinkComplete(handle) != NVJITLINK_SUCCESS)
    return Status::error("nvJitLink: linking " + std::to_string(kernels.size()) +
                         " kernels for sm_90a failed: " + errorLog());
  size_t size = 0;
  if (nvJitLinkGetLinkedCubinSize(handle, &size) != NVJITLINK_SUCCESS || size == 0)
    return Status::error("nvJitLink: no linked cubin: " + errorLog());
  std::vector<uint8_t> cubin(size);
  if (nvJitLinkGetLinkedCubin(handle, cubin.data()) != NVJITLINK_SUCCESS)
    return Status::error("nvJitLink: reading the linked cubin failed: " + errorLog());
  return cubin;
}

} // namespace llmc::cuda
