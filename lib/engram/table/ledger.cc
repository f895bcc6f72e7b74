// Reading and describing the fact ledger.
#include "engram/table/ledger.h"

#include <cstdio>

#include "engram/base/json.h"
#include "engram/format/view.h"

namespace engram::table {

LedgerListing ReadLedger(const std::string& path) {
  format::ViewOptions vo;
  vo.deterministic_addressing = false;
  vo.open.lock = format::ReadLock::kHold;
  auto view = format::TableView::Open(path, vo);
  LedgerListing l;
  l.folded = view->reader().Facts();
  l.journal = view->journal().facts;
  return l;
}

std::string DescribeFact(const format::Fact& f, bool folded) {
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g", f.margin);
  std::string s = "#" + std::to_string(f.id) + " " +
                  base::JsonString(f.prompts.empty() ? "" : f.prompts.front().text) + " -> " +
                  base::JsonString(f.target) + " (";
  if (f.text_entry) s += "text; ";
  if (f.prompts.size() > 1) s += std::to_string(f.prompts.size()) + " phrasings; ";
  s += std::to_string(f.rows.size()) + " rows, margin " + margin + ", " +
       (f.fitted ? "fitted" : "NOT fitted when appended") + ", " +
       (folded ? "folded" : "in the journal") + ")";
  for (size_t i = 1; i < f.prompts.size(); ++i)
    s += "\n    also " + base::JsonString(f.prompts[i].text);
  return s;
}

std::string FactJson(const format::Fact& f, bool folded) {
  std::string j = "{\"id\":" + std::to_string(f.id) + ",\"prompts\":[";
  for (size_t i = 0; i < f.prompts.size(); ++i)
    j += (i ? "," : "") + base::JsonString(f.prompts[i].text);
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g", f.margin);
  j += "],\"target\":" + base::JsonString(f.target) +
       ",\"text\":" + (f.text_entry ? "true" : "false") + ",\"margin\":" + margin +
       ",\"fitted\":" + (f.fitted ? "true" : "false") +
       ",\"rows\":" + std::to_string(f.rows.size()) +
       ",\"created_unix\":" + std::to_string(f.created_unix) +
       ",\"folded\":" + (folded ? "true" : "false") + "}";
  return j;
}

}  // namespace engram::table
