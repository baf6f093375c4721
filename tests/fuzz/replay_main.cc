// Copyright 2026 The kvstore Authors.
//
// The main() of a fuzz target outside libFuzzer: runs LLVMFuzzerTestOneInput
// once on every file named on the command line (directories are walked, in
// sorted order), so that a plain gcc `bazel test` replays the seed corpus
// and every reproducer kept there. A crash or a failed KV_FUZZ_CHECK ends the
// process, which fails the test; the last "replay:" line names the input.
//
// Exit status: 0 when every input ran, 1 when there was no input at all (an
// empty corpus would make the test pass while proving nothing), 2 when an
// argument cannot be read.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The files under `arg`: itself, or a directory's regular files, sorted so
// that runs are repeatable.
bool CollectInputs(const std::string& arg, std::vector<std::string>* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(arg, ec)) {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(arg, ec)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
    if (ec) return false;
    std::sort(files.begin(), files.end());
    out->insert(out->end(), files.begin(), files.end());
    return true;
  }
  if (!fs::is_regular_file(arg, ec)) return false;
  out->push_back(arg);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 2;
    }
  }
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A copy of exactly the file's size on the heap, so that a sanitizer
    // build catches a read one byte past the input, as libFuzzer would; like
    // libFuzzer's, the pointer is never null, even for an empty input.
    std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), data.get());
    LLVMFuzzerTestOneInput(data.get(), bytes.size());
  }
  std::printf("replay: %zu input(s) ran\n", inputs.size());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs given\n");
    return 1;
  }
  return 0;
}
