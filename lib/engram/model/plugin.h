// Where engramctl finds the libraries it loads on demand (the model module, the HTTP module), so
// that a subcommand pays for libtorch or cpp-httplib/OpenSSL only when it uses them.
#pragma once

#include <string>

namespace engram::model {

// dlopens the first that loads of: $env_var, <exe dir>/../lib/<file>, <exe dir>/<file>, <file>
// (the dynamic loader's search). Returns the handle, or nullptr with one line per failed
// candidate (dlerror) appended to *errors; *found (when given) says whether a candidate file
// existed (it failed to load) rather than none being there.
void* OpenPluginLibrary(const std::string& file, const char* env_var, std::string* errors,
                        bool* found = nullptr);

}  // namespace engram::model
