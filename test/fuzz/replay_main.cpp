// Stands in for libFuzzer where it is not available (GCC builds, CI): runs the fuzz target once
// on every file named, or found under a directory named, on the command line, as libFuzzer does
// with a corpus. A crash or an uncaught exception fails the run; so does finding no input at
// all, so that a mistyped corpus path cannot pass as a clean replay.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
namespace fs = std::filesystem;

std::vector<fs::path> inputs_under(const fs::path& arg) {
  std::vector<fs::path> files;
  if (fs::is_directory(arg)) {
    for (const auto& entry : fs::recursive_directory_iterator(arg))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());  // a stable order makes failures reproducible
  } else if (fs::is_regular_file(arg)) {
    files.push_back(arg);
  } else {
    std::fprintf(stderr, "replay: no such file or directory: %s\n", arg.c_str());
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    for (const fs::path& file : inputs_under(argv[i])) {
      // Read into an allocation of exactly its size, as libFuzzer does, so that sanitizer
      // builds catch a read past the end.
      std::vector<uint8_t> bytes(static_cast<size_t>(fs::file_size(file)));
      std::ifstream in(file, std::ios::binary);
      in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      // Printed first: if the input crashes the target, this line names it.
      std::printf("replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      std::fflush(stdout);
      static const uint8_t kEmpty = 0;  // libFuzzer never passes a null pointer either
      LLVMFuzzerTestOneInput(bytes.empty() ? &kEmpty : bytes.data(), bytes.size());
      ++replayed;
    }
  }
  std::printf("replay: %zu inputs, no crash\n", replayed);
  return replayed > 0 ? 0 : 1;
}
