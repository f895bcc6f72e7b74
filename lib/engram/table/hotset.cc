// Hot-set sizing: the row trace of a corpus, its LRU stack distances, the hit-rate curve, and
// the curve as text, JSON and SVG.
#include "engram/table/hotset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "engram/base/units.h"
#include "engram/hash/addressing.h"

namespace engram::table {

std::vector<uint64_t> RowTrace(const format::Layout& l,
                               const std::vector<std::vector<uint32_t>>& documents) {
  const hash::AddressSpec& s = l.spec;
  const size_t per = s.per_layer(), layers = s.n_layers();
  std::vector<uint64_t> trace;
  std::vector<uint64_t> buckets;
  for (const auto& doc : documents) {
    if (doc.empty()) continue;
    // Every layer's buckets of the document, then the reads in model order: position by
    // position (a generated token reads its rows in every layer before the next token).
    buckets.resize(layers * doc.size() * per);
    for (size_t li = 0; li < layers; ++li)
      hash::ComputeBuckets(s, li, doc, buckets.data() + li * doc.size() * per);
    for (size_t t = 0; t < doc.size(); ++t)
      for (size_t li = 0; li < layers; ++li)
        for (size_t k = 0; k < per; ++k)
          trace.push_back(l.RowOf(li * per + k, buckets[li * doc.size() * per + t * per + k]));
  }
  return trace;
}

HotsetResult Hotset(std::span<const uint64_t> trace, uint64_t bytes_per_row, uint64_t table_rows) {
  HotsetResult r;
  r.lookups = trace.size();
  r.bytes_per_row = bytes_per_row;
  r.table_rows = table_rows;
  // Fenwick tree over read times: 1 at the time of each row's latest read. The distinct rows
  // read since row x's last read at time p are the ones marked in (p, now).
  const size_t n = trace.size();
  std::vector<uint32_t> tree(n + 1, 0);
  auto add = [&](size_t i, int v) {
    for (++i; i <= n; i += i & (~i + 1)) tree[i] += static_cast<uint32_t>(v);
  };
  auto prefix = [&](size_t i) {  // marks in [0, i)
    uint64_t s = 0;
    for (; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
  };
  std::unordered_map<uint64_t, size_t> last;
  last.reserve(n / 4 + 16);
  uint64_t marked = 0;
  for (size_t now = 0; now < n; ++now) {
    auto [it, fresh] = last.try_emplace(trace[now], now);
    if (fresh) {
      r.distinct_rows++;
    } else {
      const size_t p = it->second;
      const uint64_t d = marked - prefix(p + 1);  // marks after p
      if (d >= r.hits_at.size()) r.hits_at.resize(d + 1, 0);
      r.hits_at[d]++;
      add(p, -1);
      marked--;
      it->second = now;
    }
    add(now, 1);
    marked++;
  }
  // The curve: log-spaced sizes from 1 row to every distinct row (at least 20 points).
  const uint64_t top = std::max<uint64_t>(1, r.distinct_rows);
  std::vector<uint64_t> sizes;
  const int points = 40;
  for (int k = 0; k <= points; ++k) {
    const uint64_t c = static_cast<uint64_t>(
        std::llround(std::pow(static_cast<double>(top), static_cast<double>(k) / points)));
    if (sizes.empty() || c > sizes.back()) sizes.push_back(std::max<uint64_t>(1, c));
  }
  for (uint64_t c = 1; sizes.size() < 20 && c <= top; ++c)  // few distinct rows: every size
    if (!std::binary_search(sizes.begin(), sizes.end(), c))
      sizes.insert(std::lower_bound(sizes.begin(), sizes.end(), c), c);
  std::vector<uint64_t> cum(r.hits_at.size() + 1, 0);
  for (size_t d = 0; d < r.hits_at.size(); ++d) cum[d + 1] = cum[d] + r.hits_at[d];
  for (uint64_t c : sizes) {
    const uint64_t hits = cum[std::min<uint64_t>(c, r.hits_at.size())];
    r.curve.push_back({c, c * bytes_per_row,
                       r.lookups ? static_cast<double>(hits) / static_cast<double>(r.lookups) : 0});
  }
  return r;
}

double HotsetResult::HitRate(uint64_t rows) const {
  uint64_t hits = 0;
  for (size_t d = 0; d < hits_at.size() && d < rows; ++d) hits += hits_at[d];
  return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0;
}

uint64_t HotsetResult::RowsFor(double rate) const {
  uint64_t hits = 0;
  const double need = rate * static_cast<double>(lookups);
  for (size_t d = 0; d < hits_at.size(); ++d) {
    hits += hits_at[d];
    if (static_cast<double>(hits) >= need - 1e-9) return d + 1;
  }
  return 0;
}

namespace {

std::string Pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

std::string Num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", x);
  return b;
}

}  // namespace

std::string HotsetResult::ToText() const {
  std::ostringstream os;
  os << "lookups: " << lookups << " row reads\n"
     << "distinct rows: " << distinct_rows << " of " << table_rows << " ("
     << base::FormatBytes(distinct_rows * bytes_per_row) << " at " << bytes_per_row
     << " bytes a row)\n"
     << "first touch: " << Pct(first_touch())
     << " of lookups read a row for the first time (no cache serves them)\n"
     << "LRU row cache hit rate by size:\n";
  for (const auto& p : curve)
    os << "  " << p.rows << " rows (" << base::FormatBytes(p.bytes) << "): " << Pct(p.hit_rate)
       << "\n";
  for (double t : {0.90, 0.95, 0.99}) {
    const uint64_t rows = RowsFor(t);
    os << Pct(t) << " hit rate: ";
    if (rows)
      os << rows << " rows (" << base::FormatBytes(rows * bytes_per_row) << ")\n";
    else
      os << "not reachable (at most " << Pct(1 - first_touch()) << ": the rest are first touches; "
         << "a longer corpus or trace shows more reuse)\n";
  }
  return os.str();
}

std::string HotsetResult::ToJson() const {
  std::ostringstream os;
  os << "{\"lookups\":" << lookups << ",\"distinct_rows\":" << distinct_rows
     << ",\"first_touch\":" << Num(first_touch()) << ",\"bytes_per_row\":" << bytes_per_row
     << ",\"table_rows\":" << table_rows << ",\"curve\":[";
  for (size_t i = 0; i < curve.size(); ++i)
    os << (i ? "," : "") << "{\"rows\":" << curve[i].rows << ",\"bytes\":" << curve[i].bytes
       << ",\"hit_rate\":" << Num(curve[i].hit_rate) << "}";
  os << "],\"rows_for\":{";
  const char* keys[] = {"0.90", "0.95", "0.99"};
  const double rates[] = {0.90, 0.95, 0.99};
  for (int k = 0; k < 3; ++k) {
    const uint64_t rows = RowsFor(rates[k]);
    os << (k ? "," : "") << "\"" << keys[k] << "\":" << (rows ? std::to_string(rows) : "null");
  }
  os << "}}";
  return os.str();
}

std::string HotsetResult::ToSvg(const std::string& title) const {
  // Bytes on a log axis, hit rate 0..100%.
  const double W = 720, H = 420, L = 70, R = 20, T = 40, B = 60;
  const double x0 = curve.empty() ? 0 : std::log10(static_cast<double>(curve.front().bytes));
  double x1 = curve.empty() ? 1 : std::log10(static_cast<double>(curve.back().bytes));
  if (x1 <= x0) x1 = x0 + 1;
  auto X = [&](double bytes) { return L + (std::log10(bytes) - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double rate) { return T + (1 - rate) * (H - T - B); };
  std::ostringstream os;
  char b[256];
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
     << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string t;
  for (char c : title)
    t += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
  os << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << t
     << "</text>\n";
  for (int k = 0; k <= 10; ++k) {  // hit-rate grid
    const double y = Y(k / 10.0);
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n",
                  L, y, W - R, y, L - 6, y + 4, k * 10);
    os << b;
  }
  // Ticks at powers of 32 bytes (1 KiB, 32 KiB, 1 MiB, ...), labelled as people size caches.
  for (int e = 0; e <= 12; ++e) {
    const double v = std::pow(32.0, e);
    if (std::log10(v) < x0 - 1e-9 || std::log10(v) > x1 + 1e-9) continue;
    const double x = X(v);
    std::string label = base::FormatBytes(static_cast<uint64_t>(v));
    if (label.size() > 4 && label.compare(label.size() - 6, 2, ".0") == 0)
      label.erase(label.size() - 6, 2);  // "32.0 KiB" -> "32 KiB"
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                  x, T, x, H - B, x, H - B + 18, label.c_str());
    os << b;
  }
  os << "<polyline fill=\"none\" stroke=\"#1f6fb4\" stroke-width=\"2\" points=\"";
  for (const auto& p : curve) {
    std::snprintf(b, sizeof b, "%.1f,%.1f ", X(static_cast<double>(p.bytes)), Y(p.hit_rate));
    os << b;
  }
  os << "\"/>\n";
  std::snprintf(b, sizeof b,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">LRU row cache size (bytes, "
                "log scale)</text>\n<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                "transform=\"rotate(-90 16 %.1f)\">hit rate</text>\n",
                (L + W - R) / 2, H - 18, (T + H - B) / 2, (T + H - B) / 2);
  os << b;
  std::snprintf(b, sizeof b,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%llu lookups, "
                "%llu distinct rows, first touch %.1f%%</text>\n",
                W - R, T + 16, static_cast<unsigned long long>(lookups),
                static_cast<unsigned long long>(distinct_rows), 100 * first_touch());
  os << b << "</svg>\n";
  return os.str();
}

}  // namespace engram::table
