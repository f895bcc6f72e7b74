// serve's guard against a table file truncated under the model session's mapping. Reading a
// mapped page past the end of a file that shrank raises SIGBUS, which would kill the server on
// the next request. The guard's SIGBUS handler maps a zero page over the faulting page of the
// table's mapping (only that file's, found in /proc/self/maps) and counts the fault; the
// scheduler then answers that batch, and every later one served by the same damaged table state,
// with 503 until the file is restored or replaced. Internal to libengram_serve.so.
#pragma once

#include <cstdint>
#include <string>

namespace engram::serve {

// The faults patched so far, over the process (monotonic; read from any thread).
uint64_t TableFaults();

// Installs the process's SIGBUS handler (once; later calls only change the path) for the table
// file at `path`, resolved to the absolute path /proc/self/maps shows. A SIGBUS anywhere else,
// or of another kind than a read past the end of a file, keeps its default action (the process
// dies with SIGBUS). Not thread-safe against itself: call it before the scheduler thread starts.
void GuardTableMapping(const std::string& path);

}  // namespace engram::serve
