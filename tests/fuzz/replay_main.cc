// Replays fuzz corpora without libFuzzer (for ctest): every file in the given directories (or the
// given files) is fed to LLVMFuzzerTestOneInput once.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engram/base/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> files;
    struct stat st;
    if (::stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(argv[i]);
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') files.push_back(std::string(argv[i]) + "/" + e->d_name);
      ::closedir(d);
    } else {
      files.push_back(argv[i]);
    }
    for (const auto& f : files) {
      std::string bytes = engram::base::ReadFileToString(f, 1ull << 30);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++n;
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return n ? 0 : 1;
}
