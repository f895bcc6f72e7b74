// Inspect: read-only summary of a table (no row data is touched unless --stats).
#include "engram/table/inspect.h"

#include <fcntl.h>

#include <cstdio>
#include <ctime>
#include <sstream>

#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/units.h"
#include "engram/format/journal.h"
#include "engram/format/reader.h"

namespace engram::table {

InspectInfo Inspect(const std::string& path, const InspectOptions& opts) {
  auto r = format::Reader::Open(path, format::OpenOptions{true, opts.check_metadata});
  const format::Header& h = r->header();
  const format::Layout& l = r->layout();
  InspectInfo in;
  in.path = path;
  in.file_length = r->file_length();
  in.base_size = h.file_size;
  in.version_major = h.version_major;
  in.version_minor = h.version_minor;
  in.created_unix = h.created_unix;
  in.addressing = std::string(hash::AddressingName(l.spec.mode));
  in.dtype = std::string(base::DTypeName(l.dtype));
  in.seed = l.spec.seed;
  in.layer_ids = l.spec.layer_ids;
  in.max_order = l.spec.max_order;
  in.n_heads = l.spec.n_heads;
  in.row_dim = l.row_dim;
  in.memory_dim = l.memory_dim();
  in.log2_buckets = l.spec.log2_buckets;
  in.buckets_min = UINT64_MAX;
  for (uint64_t s : l.spec.sizes) {
    in.buckets_min = std::min(in.buckets_min, s);
    in.buckets_max = std::max(in.buckets_max, s);
  }
  in.total_rows = l.total_rows;
  in.subtables = l.spec.n_subtables();
  in.pad_id = l.spec.pad_id;
  in.canonical_vocab = l.spec.canonical_vocab;
  in.tokenizer_vocab = static_cast<uint32_t>(l.canon_map.size());
  in.tokenizer_fingerprint = l.tokenizer_fingerprint;
  in.multipliers = l.spec.multipliers;
  for (uint32_t i = 0; i < h.n_sections; ++i)
    in.sections.push_back({std::string(format::SectionName(h.sections[i].type)),
                           h.sections[i].offset, h.sections[i].size});
  in.chunk_bytes = 1u << h.chunk_log2;
  if (auto s = r->Section(format::SectionType::kChunkSums); !s.empty()) in.n_chunks = s.size() / 8;
  {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.header_checksum));
    in.header_checksum = buf;
  }
  in.has_stats = r->has_stats();
  in.sketch_owners = (h.optional_flags & format::kOptSketchOwners) != 0;
  in.owner_mode = in.sketch_owners ? "sketch" : "exact";
  in.provenance = r->provenance();
  {
    base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
    format::JournalState js =
        format::ReadJournal(fd.get(), path, h, l, r->file_length(), /*keep_entries=*/false);
    format::RequireIntact(js, path);  // `verify` reports the damage; inspect must not hide it
    in.journal_entries = js.n_committed;
    in.journal_commits = js.n_commits;
    in.journal_bytes = js.committed_end - js.start;
    in.journal_tail_bytes = js.tail_bytes();
    in.has_ledger = (h.required_flags & format::kReqLedger) != 0;
    in.ledger_journal = js.n_facts;
    in.ledger_folded = r->Facts().size();
  }
  if (opts.stats) {
    in.stats_scanned = true;
    in.load_histogram.assign(17, 0);
    for (uint64_t row = 0; row < l.total_rows; ++row) {
      if (r->Tag(row) != 0) in.owned_rows++;
      if (r->has_stats()) {
        format::StatsRow s = r->Stats(row);
        in.load_histogram[std::min<uint32_t>(s.load, 16)]++;
        const size_t bin = s.load == 0 ? 0 : 32 - static_cast<size_t>(__builtin_clz(s.load));
        if (in.load_log2_histogram.size() <= bin) in.load_log2_histogram.resize(bin + 1, 0);
        in.load_log2_histogram[bin]++;
        in.load_max = std::max<uint64_t>(in.load_max, s.load);
        in.load_sum += s.load;
        if (s.load > 1) in.collided_rows++;
        in.occurrences += s.total_count;
        in.owner_occurrences += s.owner_count;
      }
      // Every 64Ki rows: unmap the tags and stats scanned (a table larger than memory never
      // becomes inspect's resident memory; the page cache keeps what it can).
      if ((row + 1) % 65536 == 0 && r->mapped()) {
        const uint64_t first = row + 1 - 65536;
        base::ReleaseMappedPages(r->Section(format::SectionType::kTags).data() + first * 4,
                                 65536 * 4);
        if (r->has_stats())
          base::ReleaseMappedPages(
              r->Section(format::SectionType::kStats).data() + first * format::kStatsRowSize,
              65536 * format::kStatsRowSize);
      }
    }
  }
  return in;
}

namespace {
std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
std::string LoadMean(uint64_t sum, uint64_t rows) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f",
                rows ? static_cast<double>(sum) / static_cast<double>(rows) : 0.0);
  return buf;
}
std::string Pct(uint64_t a, uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%",
                b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0);
  return buf;
}
}  // namespace

std::string InspectInfo::ToText() const {
  std::ostringstream os;
  os << "table:        " << path << "\n"
     << "format:       v" << version_major << "." << version_minor << ", "
     << base::FormatBytes(file_length) << " (base " << base::FormatBytes(base_size) << ", journal "
     << base::FormatBytes(file_length - base_size) << ")\n";
  std::time_t t = static_cast<std::time_t>(created_unix);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  os << "created:      " << when << "\n";
  os << "addressing:   " << addressing << ", seed " << seed;
  if (addressing == "native")
    os << ", 2^" << log2_buckets << " = " << buckets_min << " buckets per sub-table";
  else
    os << ", prime sub-table sizes " << buckets_min << ".." << buckets_max;
  os << "\nlayers:       [";
  for (size_t i = 0; i < layer_ids.size(); ++i) os << (i ? ", " : "") << layer_ids[i];
  os << "], orders 2.." << max_order << ", " << n_heads << " heads per order (" << subtables
     << " sub-tables)\n";
  if (!multipliers.empty()) {
    os << "multipliers:  ";
    size_t per = max_order;
    for (size_t li = 0; li < layer_ids.size(); ++li) {
      os << (li ? "; " : "") << "layer " << layer_ids[li] << ":";
      for (size_t k = 0; k < per; ++k) os << " " << multipliers[li * per + k];
    }
    os << "\n";
  }
  os << "rows:         " << total_rows << " x " << row_dim << " " << dtype
     << " values (memory vector " << memory_dim << " per layer)\n";
  os << "vocabulary:   " << canonical_vocab << " canonical ids";
  if (tokenizer_vocab)
    os << " from " << tokenizer_vocab << " tokenizer ids ("
       << Pct(tokenizer_vocab - canonical_vocab, tokenizer_vocab)
       << " smaller), tokenizer fingerprint " << Hex(tokenizer_fingerprint);
  else
    os << " (token ids are canonical ids; no tokenizer)";
  os << ", pad id " << pad_id << "\n";
  os << "owners:       " << owner_mode << (has_stats ? ", with per-bucket statistics" : "") << "\n";
  os << "checksums:    header " << header_checksum << ", " << n_chunks << " chunks of "
     << base::FormatBytes(chunk_bytes) << " (run 'engramctl verify' to check them)\n";
  os << "journal:      ";
  if (journal_entries == 0 && journal_tail_bytes == 0)
    os << "empty (addressing is deterministic)\n";
  else
    os << journal_entries << " committed entries in " << journal_commits << " commits ("
       << base::FormatBytes(journal_bytes) << ")"
       << (journal_tail_bytes ? ", uncommitted tail " + base::FormatBytes(journal_tail_bytes)
                              : std::string())
       << (journal_entries ? "; run 'engramctl sort-buckets' to fold them" : "") << "\n";
  if (has_ledger)
    os << "ledger:       " << ledger_folded + ledger_journal << " fact(s) (" << ledger_folded
       << " folded, " << ledger_journal << " in the journal); 'engramctl facts' lists them\n";
  os << "sections:\n";
  for (const auto& s : sections)
    os << "  " << s.name << std::string(12 - std::min<size_t>(11, s.name.size()), ' ') << "offset "
       << s.offset << ", " << base::FormatBytes(s.size) << "\n";
  if (stats_scanned) {
    os << "statistics:\n"
       << "  occupancy:      " << owned_rows << " of " << total_rows << " rows have an owner ("
       << Pct(owned_rows, total_rows) << ")\n";
    if (has_stats) {
      os << "  collision rate: " << Pct(collided_rows, owned_rows)
         << " of owned rows hold more than one n-gram\n"
         << "  owner share:    " << Pct(owner_occurrences, occurrences) << " of " << occurrences
         << " corpus occurrences belong to their bucket's owner\n"
         << "  load:           mean " << LoadMean(load_sum, total_rows) << ", max " << load_max
         << " distinct n-grams per row\n"
         << "  load histogram (distinct n-grams per row):\n";
      // Loads above 15 get power-of-two bins; below, one bin per load.
      const bool log2 = load_max >= 16;
      const std::vector<uint64_t>& h = log2 ? load_log2_histogram : load_histogram;
      uint64_t mx = 1;
      for (uint64_t v : h) mx = std::max(mx, v);
      for (size_t i = 0; i < h.size(); ++i) {
        if (h[i] == 0) continue;
        std::string label = std::to_string(i);
        if (log2 && i >= 2)
          label = std::to_string(1ull << (i - 1)) + "-" + std::to_string((1ull << i) - 1);
        else if (!log2 && i == 16)
          label = ">=16";
        const size_t width = log2 ? 14 : 5;
        os << "    " << label << std::string(label.size() < width ? width - label.size() : 1, ' ')
           << std::string(
                  static_cast<size_t>(40.0 * static_cast<double>(h[i]) / static_cast<double>(mx)),
                  '#')
           << " " << h[i] << "\n";
      }
    } else {
      os << "  (no STATS section: built with --no-stats)\n";
    }
  }
  return os.str();
}

std::string InspectInfo::ToJson() const {
  std::ostringstream os;
  auto arr_u = [&](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  os << "{\"path\":" << base::JsonString(path) << ",\"version\":\"" << version_major << "."
     << version_minor << "\""
     << ",\"file_bytes\":" << file_length << ",\"base_bytes\":" << base_size
     << ",\"created_unix\":" << created_unix << ",\"addressing\":\"" << addressing
     << "\",\"seed\":" << seed << ",\"layer_ids\":" << arr_u(layer_ids)
     << ",\"max_order\":" << max_order << ",\"n_heads\":" << n_heads
     << ",\"subtables\":" << subtables << ",\"log2_buckets\":" << log2_buckets
     << ",\"buckets_min\":" << buckets_min << ",\"buckets_max\":" << buckets_max
     << ",\"total_rows\":" << total_rows << ",\"row_dim\":" << row_dim
     << ",\"memory_dim\":" << memory_dim << ",\"dtype\":\"" << dtype << "\",\"pad_id\":" << pad_id
     << ",\"canonical_vocab\":" << canonical_vocab << ",\"tokenizer_vocab\":" << tokenizer_vocab
     << ",\"tokenizer_fingerprint\":\"" << Hex(tokenizer_fingerprint) << "\""
     << ",\"multipliers\":" << arr_u(multipliers) << ",\"owner_mode\":\"" << owner_mode << "\""
     << ",\"has_stats\":" << (has_stats ? "true" : "false") << ",\"header_checksum\":\""
     << header_checksum << "\""
     << ",\"chunk_bytes\":" << chunk_bytes << ",\"chunks\":" << n_chunks << ",\"sections\":[";
  for (size_t i = 0; i < sections.size(); ++i)
    os << (i ? "," : "") << "{\"name\":\"" << sections[i].name
       << "\",\"offset\":" << sections[i].offset << ",\"size\":" << sections[i].size << "}";
  os << "],\"journal\":{\"entries\":" << journal_entries << ",\"commits\":" << journal_commits
     << ",\"bytes\":" << journal_bytes << ",\"tail_bytes\":" << journal_tail_bytes
     << ",\"deterministic\":" << (journal_entries == 0 ? "true" : "false") << "}";
  if (has_ledger)
    os << ",\"ledger\":{\"folded\":" << ledger_folded << ",\"journal\":" << ledger_journal << "}";
  if (stats_scanned) {
    os << ",\"stats\":{\"owned_rows\":" << owned_rows << ",\"collided_rows\":" << collided_rows
       << ",\"occurrences\":" << occurrences << ",\"owner_occurrences\":" << owner_occurrences
       << ",\"load_histogram\":" << arr_u(load_histogram)
       << ",\"load_log2_histogram\":" << arr_u(load_log2_histogram) << ",\"load_max\":" << load_max
       << ",\"load_mean\":" << LoadMean(load_sum, total_rows) << "}";
  }
  base::Json prov;
  bool prov_ok = true;
  try {
    prov = base::Json::Parse(provenance, "provenance", 32);
  } catch (...) {
    prov_ok = false;
  }
  os << ",\"provenance\":"
     << (prov_ok && prov.is_object() ? provenance : base::JsonString(provenance)) << "}";
  return os.str();
}

}  // namespace engram::table
