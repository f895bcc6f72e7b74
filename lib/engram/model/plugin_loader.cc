// Finds and dlopens libengram_model.so for `engramctl run` (torch-free).
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "engram/base/file.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/model/fit.h"
#include "engram/model/plugin.h"
#include "engram/model/run.h"
#include "engram/model/session.h"

namespace engram::model {

void* OpenPluginLibrary(const std::string& file, const char* env_var, std::string* errors,
                        bool* found) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv(env_var); p && *p) candidates.push_back(p);
  if (const std::string exe = base::ExecutablePath(); !exe.empty()) {
    std::string dir = base::DirName(exe);
    candidates.push_back(dir + "/../lib/" + file);
    candidates.push_back(dir + "/" + file);
  }
  candidates.push_back(file);
  for (const auto& c : candidates) {
    if (c.find('/') != std::string::npos && !base::PathExists(c)) continue;
    if (found && c.find('/') != std::string::npos) *found = true;
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *errors += std::string("\n  ") + ::dlerror();
  }
  return nullptr;
}

RunFn LoadModelPlugin() {
  // libtorch's static initialisers abort the process ("terminate called without an active
  // exception") when an allocation fails inside dlopen, and a model that does load under a tight
  // limit can spin in malloc: refuse up front when the address-space limit leaves less than
  // kModuleAddressSpace beside what this process maps already.
  constexpr uint64_t kModuleAddressSpace = 1ull << 30;
  if (const uint64_t limit = base::AddressSpaceLimitBytes()) {
    const uint64_t used = base::CurrentVirtualBytes();
    ENGRAM_CHECK(limit > used && limit - used >= kModuleAddressSpace, Code::kIo,
                 "the model module (libtorch) needs about "
                     << base::FormatBytes(kModuleAddressSpace)
                     << " of address space beside the table and the model's weights"
                     << base::MemoryLimitHint());
  }
  std::string errors;
  bool found = false;
  if (void* h = OpenPluginLibrary("libengram_model.so", "ENGRAM_MODEL_PLUGIN", &errors, &found)) {
    auto fn = reinterpret_cast<RunFn>(::dlsym(h, kRunSymbol));
    ENGRAM_CHECK(
        fn != nullptr, Code::kInternal,
        "libengram_model.so has no " << kRunSymbol << "; it belongs to another engramctl version");
    return fn;
  }
  // The library is there but did not load: most often memory (ulimit -v, a cgroup limit), since
  // libtorch maps several hundred MB. Say so rather than blame the build.
  if (found)
    ENGRAM_THROW(Code::kIo,
                 "the model module (libengram_model.so, which maps libtorch: about 0.5 GB of "
                 "address space) failed to load"
                     << errors
                     << ((errors.find("map") != std::string::npos ||
                          errors.find("memory") != std::string::npos)
                             ? "\nthe process is short of memory: raise the limit (ulimit -v, the "
                               "service's MemoryMax) or free memory"
                             : "\nreinstall engramctl with its lib/ folder"));
  ENGRAM_THROW(
      Code::kInvalidArgument,
      "the model module (libengram_model.so) is not available: this engramctl was built without "
      "libtorch "
      "(-DENGRAM_WITH_TORCH=OFF) or the library is missing; rebuild with -DENGRAM_WITH_TORCH=ON"
          << errors);
}

namespace {

// The other entry points live in the same library: find it through the run entry point (which
// loads the library, with its messages) so that the search order stays in one place.
void* PluginSymbol(const char* symbol) {
  RunFn run = LoadModelPlugin();
  Dl_info info{};
  ENGRAM_CHECK(::dladdr(reinterpret_cast<void*>(run), &info) != 0 && info.dli_fname,
               Code::kInternal, "cannot locate the loaded model module");
  void* h = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ENGRAM_CHECK(h != nullptr, Code::kInternal, info.dli_fname << ": " << ::dlerror());
  void* fn = ::dlsym(h, symbol);
  ENGRAM_CHECK(
      fn != nullptr, Code::kInternal,
      info.dli_fname << " has no " << symbol << "; it belongs to another engramctl version");
  return fn;
}

}  // namespace

OpenSessionFn LoadSessionPlugin() {
  return reinterpret_cast<OpenSessionFn>(PluginSymbol(kSessionSymbol));
}

SetupProblemsFn LoadSetupProblemsPlugin() {
  return reinterpret_cast<SetupProblemsFn>(PluginSymbol(kSetupProblemsSymbol));
}

FitFn LoadFitPlugin() { return reinterpret_cast<FitFn>(PluginSymbol(kFitSymbol)); }

}  // namespace engram::model
