// Parsing and printing of sizes and durations as users write them ("4G", "512MiB", "50%").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace engram::base {

// GNU sort --buffer-size style: a number with an optional suffix b (bytes), K, M, G, T, P, E
// (powers of 1024, optionally followed by "iB" or "B"), or "%" of physical memory. A bare number
// means bytes when default_unit is 'b' and KiB when it is 'K' (as sort does). Throws
// kInvalidArgument naming `what` (e.g. "--memory") on anything else or on overflow.
uint64_t ParseSize(std::string_view text, std::string_view what, char default_unit = 'b');

// "1.5 GiB", "512.0 KiB", "17 B".
std::string FormatBytes(uint64_t bytes);
// Decimal GB as users' configs count them: "48.0 GB".
std::string FormatGB(double bytes);
// "12.4s", "850ms".
std::string FormatSeconds(double seconds);

// Physical RAM and MemAvailable from /proc/meminfo (0 when unreadable).
uint64_t PhysicalMemoryBytes();
uint64_t AvailableMemoryBytes();

// Parses "I/N" (0 <= I < N) as used by --shard. Throws kInvalidArgument.
void ParseShard(std::string_view text, uint32_t* index, uint32_t* count);

}  // namespace engram::base
