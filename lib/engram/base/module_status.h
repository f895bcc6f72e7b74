// How an error crosses the boundary of a module engramctl loads on demand (libengram_model.so,
// libengram_serve.so): their entry points have C linkage and throw nothing. Each returns a
// status, 0 on success or 1 + the engram::Code of the error it caught, with the message in a
// std::string* error that is its last parameter. The module side wraps its body in
// CatchAsStatus; the caller turns the status back into the Error with CallModule.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "engram/base/error.h"

namespace engram::base {

// Runs body(): 0 when it returns; 1 + e.code() with *error = e.what() for an engram::Error; an
// internal error naming `module` for any other exception.
template <class Body>
int CatchAsStatus(const char* module, std::string* error, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    *error = e.what();
    return 1 + static_cast<int>(e.code());
  } catch (const std::exception& e) {
    *error = std::string("internal error in ") + module + ": " + e.what();
  } catch (...) {
    *error = std::string("internal error in ") + module + ": unknown exception";
  }
  return 1 + static_cast<int>(Code::kInternal);
}

// Throws the Error a non-zero status stands for (a status out of range is an internal error).
void ThrowIfFailed(int status, const std::string& error);

// Calls the entry point fn(args..., &error) and throws the Error its status stands for.
template <class Fn, class... Args>
void CallModule(Fn fn, Args&&... args) {
  std::string error;
  ThrowIfFailed(fn(std::forward<Args>(args)..., &error), error);
}

}  // namespace engram::base
