// Replay driver for fuzz targets on compilers without libFuzzer: runs
// LLVMFuzzerTestOneInput once on every file of the given folders or files.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void runOne(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

int main(int argc, char **argv) {
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto &entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) {
          runOne(entry.path());
          ++count;
        }
    } else {
      runOne(arg);
      ++count;
    }
  }
  std::printf("replayed %zu inputs (no libFuzzer with this compiler)\n", count);
  return count > 0 ? 0 : 1;
}
