// What serve shows about itself: /metrics in the Prometheus text format and the status page at /
// (an HTML table and an SVG chart of recent hit rates). Internal to libengram_serve.so.
#pragma once

#include <string>

#include "engram/serve/scheduler.h"

namespace engram::serve {

// Prometheus text exposition format 0.0.4.
std::string MetricsText(const ServeSnapshot& s);
// The status page; config_path is shown as given.
std::string StatusPageHtml(const ServeSnapshot& s, const std::string& config_path);

}  // namespace engram::serve
