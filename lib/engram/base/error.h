// The one exception type of libengram, its codes, and the ENGRAM_CHECK family of throw macros.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engram {

// What kind of failure an Error reports. The CLI maps each code to an exit status
// (schemas/cli.md): kIo/kCorrupt/kInternal/kCuda -> 1, kInvalidArgument/kConfig -> 2,
// kVersion -> 4.
enum class Code : uint8_t {
  kIo,               // a system call failed (open, read, write, fsync, rename, mmap, ...)
  kCorrupt,          // a file's bytes are not what its format promises
  kVersion,          // a file of a format version this build does not read
  kInvalidArgument,  // a caller (usually a user's flag) asked for something impossible
  kConfig,           // a config.toml problem; the message names file:line and key
  kCuda,             // the CUDA runtime or driver reported an error
  kInternal,         // a broken invariant inside libengram (a bug)
};

// Stable lowercase name of a code ("io", "corrupt", ...), used in --json output.
std::string_view CodeName(Code code) noexcept;

// Every failure libengram reports. what() is the user-facing message: subject, values, fix.
// where() is "file.cc:123" of the throw site, for bug reports; it is not part of the message.
class Error : public std::runtime_error {
 public:
  Error(Code code, std::string message, std::string where = {});
  Code code() const noexcept { return code_; }
  const std::string& where() const noexcept { return where_; }

 private:
  Code code_;
  std::string where_;
};

namespace base::detail {
[[noreturn]] void Throw(Code code, const std::string& message, const char* file, int line);
}  // namespace base::detail

}  // namespace engram

namespace engram::base {
// Fault injection for crash tests: when the environment variable ENGRAM_CRASH_AT equals `point`,
// the process kills itself with SIGKILL here (scripts/crash_test.sh). A no-op otherwise.
void CrashPoint(const char* point) noexcept;

// Problems found in a line-oriented input file, listed all at once. ThrowIfAny throws
// kInvalidArgument "<head(n)>; nothing was written:" followed by up to 25 "FILE:LINE: problem"
// lines in line order (n = the number of distinct lines with a problem).
class LineProblems {
 public:
  explicit LineProblems(std::string file) : file_(std::move(file)) {}
  void Add(size_t line, std::string what) { problems_.emplace_back(line, std::move(what)); }
  bool empty() const noexcept { return problems_.empty(); }
  template <class Head>
  void ThrowIfAny(Head&& head) {
    if (!problems_.empty()) Throw(head(DistinctLines()));
  }

 private:
  size_t DistinctLines();
  [[noreturn]] void Throw(const std::string& head) const;
  std::string file_;
  std::vector<std::pair<size_t, std::string>> problems_;
};
}  // namespace engram::base

// Throws engram::Error(code, message) when cond is false. msg is a stream expression:
//   ENGRAM_CHECK(n > 0, Code::kInvalidArgument, "--threads = " << n << ", must be >= 1");
#define ENGRAM_CHECK(cond, code, msg)                                                    \
  do {                                                                                   \
    if (!(cond)) [[unlikely]] {                                                          \
      std::ostringstream engram_check_os_;                                               \
      engram_check_os_ << msg;                                                           \
      ::engram::base::detail::Throw((code), engram_check_os_.str(), __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)

// Unconditional throw with the same message syntax.
#define ENGRAM_THROW(code, msg) ENGRAM_CHECK(false, code, msg)

// Internal invariants only (never for anything a file, flag or environment can cause).
// Active in debug builds; compiled out with NDEBUG.
#ifdef NDEBUG
#define ENGRAM_DCHECK(cond) \
  do {                      \
  } while (0)
#else
#define ENGRAM_DCHECK(cond) \
  ((cond) ? (void)0 : ::engram::base::detail::DcheckFail(#cond, __FILE__, __LINE__))
namespace engram::base::detail {
[[noreturn]] void DcheckFail(const char* cond, const char* file, int line);
}
#endif
