// Size parsing (GNU sort units), byte/duration formatting and /proc/meminfo reading.
#include "engram/base/units.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engram/base/checked.h"
#include "engram/base/error.h"

namespace engram::base {

uint64_t ParseSize(std::string_view text, std::string_view what, char default_unit) {
  auto bad = [&](std::string_view why) {
    ENGRAM_THROW(Code::kInvalidArgument,
                 what << " = '" << text << "': " << why
                      << "; write a number with an optional unit, e.g. 4G, 512M, 64KiB, 1T or 50%");
  };
  if (text.empty()) bad("empty");
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) bad("no number");
  std::string number(text.substr(0, i));
  std::string_view suffix = text.substr(i);
  double value = 0;
  {
    std::istringstream is(number);
    is >> value;
    if (!is || !is.eof()) bad("not a number");
  }
  double multiplier = 1;
  if (suffix == "%") {
    if (value > 100) bad("a percentage above 100");
    return static_cast<uint64_t>(static_cast<double>(PhysicalMemoryBytes()) * value / 100.0);
  }
  std::string s(suffix);
  if (s.size() >= 2 && (s.substr(s.size() - 2) == "iB"))
    s.resize(s.size() - 2);
  else if (s.size() == 2 && s[1] == 'B')
    s.resize(1);
  char unit = s.empty() ? default_unit : s[0];
  if (s.size() > 1) bad("unknown unit");
  switch (unit) {
    case 'b':
    case 'B':
      multiplier = 1;
      break;
    case 'k':
    case 'K':
      multiplier = 1024.0;
      break;
    case 'm':
    case 'M':
      multiplier = 1024.0 * 1024;
      break;
    case 'g':
    case 'G':
      multiplier = 1024.0 * 1024 * 1024;
      break;
    case 't':
    case 'T':
      multiplier = 1024.0 * 1024 * 1024 * 1024;
      break;
    case 'p':
    case 'P':
      multiplier = 1024.0 * 1024 * 1024 * 1024 * 1024;
      break;
    case 'e':
    case 'E':
      multiplier = 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024;
      break;
    default:
      bad("unknown unit");
  }
  double bytes = value * multiplier;
  if (!(bytes < 1.8e19)) bad("too large");
  if (number.find('.') == std::string::npos && multiplier == 1) {
    uint64_t exact = 0;
    auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), exact);
    if (ec != std::errc() || p != number.data() + number.size()) bad("too large");
    return exact;
  }
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string FormatGB(double bytes) {
  char buf[32];
  // One decimal as deployment logs show it ("48.0 GB"); small amounts keep two significant digits.
  if (bytes >= 1e9 || bytes == 0)
    std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.2g GB", bytes / 1e9);
  return buf;
}

std::string FormatSeconds(double seconds) {
  char buf[32];
  if (seconds < 1.0)
    std::snprintf(buf, sizeof buf, "%.0fms", seconds * 1000);
  else
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

namespace {
uint64_t MeminfoField(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  size_t klen = std::char_traits<char>::length(key);
  while (std::getline(in, line)) {
    if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':') {
      std::istringstream is(line.substr(klen + 1));
      uint64_t kib = 0;
      is >> kib;
      return kib * 1024;
    }
  }
  return 0;
}
}  // namespace

uint64_t PhysicalMemoryBytes() {
  uint64_t v = MeminfoField("MemTotal");
  if (v == 0) {
    long pages = ::sysconf(_SC_PHYS_PAGES);
    long page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) v = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  return v;
}

uint64_t AvailableMemoryBytes() { return MeminfoField("MemAvailable"); }

void ParseShard(std::string_view text, uint32_t* index, uint32_t* count) {
  size_t slash = text.find('/');
  auto bad = [&] {
    ENGRAM_THROW(Code::kInvalidArgument,
                 "--shard = '" << text << "': write I/N with 0 <= I < N, e.g. --shard 0/4");
  };
  if (slash == std::string_view::npos) bad();
  uint32_t i = 0, n = 0;
  auto r1 = std::from_chars(text.data(), text.data() + slash, i);
  auto r2 = std::from_chars(text.data() + slash + 1, text.data() + text.size(), n);
  if (r1.ec != std::errc() || r1.ptr != text.data() + slash) bad();
  if (r2.ec != std::errc() || r2.ptr != text.data() + text.size()) bad();
  if (n == 0 || i >= n) bad();
  *index = i;
  *count = n;
}

}  // namespace engram::base
