// Entries files: bounded line reading, and the entries to fit.
#include "engram/table/entries.h"

#include "engram/base/error.h"
#include "engram/base/file.h"

namespace engram::table {

void ForEachEntry(const std::string& path, const EntryLimits& limits,
                  const std::function<void(size_t, const base::Json&)>& on_entry,
                  const std::function<void(size_t, EntryProblem, std::string)>& on_problem) {
  base::ForEachLine(
      path, limits.max_line_bytes, [&](size_t line_no, std::string_view line, bool too_long) {
        if (too_long) {
          on_problem(line_no, EntryProblem::kTooLong,
                     "the line is longer than " + std::to_string(limits.max_line_bytes) + " bytes");
          return;
        }
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
        if (!base::IsValidUtf8(line)) {
          on_problem(line_no, EntryProblem::kNotUtf8, "the line is not valid UTF-8");
          return;
        }
        std::string why;
        if (!base::JsonShapeWithin(line, limits.max_items, limits.max_total_items, limits.max_depth,
                                   &why)) {
          on_problem(line_no, EntryProblem::kTooLarge, "the entry holds " + why);
          return;
        }
        base::Json j;
        try {
          j = base::Json::Parse(line, "entry", limits.max_depth);
        } catch (const Error& e) {
          std::string m = e.what();
          on_problem(line_no, EntryProblem::kNotJson,
                     "not valid JSON (" + m.substr(m.find(": ") + 2) + ")");
          return;
        }
        if (!j.is_object()) {
          on_problem(line_no, EntryProblem::kNotObject, "an entry must be a JSON object");
          return;
        }
        on_entry(line_no, j);
      });
}

bool HasValue(const base::Json& entry) {
  return entry.Find("value") != nullptr || entry.Find("value_ref") != nullptr;
}

EntriesToFit ReadEntriesToFit(const std::string& path, bool fit_requested) {
  EntriesToFit out;
  base::LineProblems problems(path);
  auto add = [&](size_t line, std::string what) { problems.Add(line, std::move(what)); };
  std::vector<size_t> value_lines;
  // Lines that are no entry at all: table::Append reports them for a file of values; here only
  // when the file holds entries to fit.
  std::vector<std::pair<size_t, std::string>> unreadable;
  // An entry to fit is a few short strings: a longer line, or one holding arrays, is an entry
  // with a value (or a bad one), left to table::Append, which bounds it by the table's row
  // width. Nothing here builds a JSON tree of more than a few hundred values.
  EntryLimits limits;
  limits.max_items = 64;
  limits.max_total_items = 256;
  limits.max_depth = 8;
  auto on_problem = [&](size_t line_no, EntryProblem kind, std::string what) {
    if (kind == EntryProblem::kTooLong || kind == EntryProblem::kTooLarge) {
      if (fit_requested)
        add(line_no, kind == EntryProblem::kTooLong
                         ? "the line is longer than 1 MiB; an entry to fit is not"
                         : what + "; an entry to fit holds strings");
      else
        value_lines.push_back(line_no);
      return;
    }
    unreadable.emplace_back(line_no, std::move(what));
  };
  auto on_entry = [&](size_t line_no, const base::Json& j) {
    const base::Json* prompt = j.Find("prompt");
    const base::Json* prompts = j.Find("prompts");
    const base::Json* target = j.Find("target");
    const base::Json* txt = j.Find("text");
    if (HasValue(j)) {
      if (prompt || prompts || target)
        add(line_no,
            "an entry with \"prompt\"/\"target\" is fitted, its value computed: remove "
            "\"value\"/\"value_ref\" (or drop \"prompt\"/\"target\" to store the value "
            "as given)");
      else if (fit_requested)
        add(line_no,
            "--fit computes the values, but this entry gives one; remove \"value\" / "
            "\"value_ref\" or append it without --fit");
      else
        value_lines.push_back(line_no);
      return;
    }
    bool ok = true;
    for (const auto& [k, v] : j.members())
      if (k != "prompt" && k != "prompts" && k != "target" && k != "text" && k != "note") {
        add(line_no, "unknown key \"" + k +
                         "\" in an entry to fit (known: prompt, prompts, target, text, "
                         "note; \"ids\"/\"layer\"/\"head\" need a \"value\")");
        ok = false;
      }
    if (!ok) return;
    FitEntry en;
    en.line = line_no;
    if (prompt || prompts || target) {
      if (txt) {
        add(line_no, "give either \"prompt\" + \"target\" (a fact) or \"text\", not both");
        return;
      }
      if (prompt && prompts) {
        add(line_no,
            "give \"prompt\" (one phrasing) or \"prompts\" (several phrasings of one fact), "
            "not both");
        return;
      }
      if (prompt) {
        if (!prompt->is_string() || prompt->as_string().empty()) {
          add(line_no, "a fact needs a non-empty \"prompt\" string");
          return;
        }
        en.prompts.push_back(prompt->as_string());
      } else if (prompts) {
        if (!prompts->is_array() || prompts->items().empty() ||
            prompts->items().size() > kMaxPhrasings) {
          add(line_no, "\"prompts\" must be an array of 1 to " + std::to_string(kMaxPhrasings) +
                           " non-empty strings, the phrasings of one fact");
          return;
        }
        for (const auto& p : prompts->items()) {
          if (!p.is_string() || p.as_string().empty()) {
            add(line_no, "\"prompts\" must hold non-empty strings (the phrasings of one fact)");
            return;
          }
          for (const auto& seen : en.prompts)
            if (seen == p.as_string()) {
              add(line_no, "\"prompts\" holds \"" + seen + "\" twice");
              return;
            }
          en.prompts.push_back(p.as_string());
        }
      } else {
        add(line_no, "a fact needs a \"prompt\" (or \"prompts\") beside its \"target\"");
        return;
      }
      if (!target || !target->is_string() || target->as_string().empty()) {
        add(line_no,
            "a fact needs a non-empty \"target\" string (what the model should say "
            "after the prompt, usually starting with a space)");
        return;
      }
      en.target = target->as_string();
    } else if (txt) {
      if (!txt->is_string() || txt->as_string().empty()) {
        add(line_no, "\"text\" must be a non-empty string");
        return;
      }
      en.text = true;
      en.target = txt->as_string();
    } else {
      add(line_no,
          "an entry needs \"prompt\" + \"target\", \"text\", or an n-gram with a "
          "\"value\"");
      return;
    }
    bool utf8 = base::IsValidUtf8(en.target);
    for (const auto& p : en.prompts) utf8 = utf8 && base::IsValidUtf8(p);
    if (!utf8) {
      add(line_no, "the entry is not valid UTF-8");
      return;
    }
    out.fit.push_back(std::move(en));
  };
  ForEachEntry(path, limits, on_entry, on_problem);
  out.value_entries = value_lines.size();
  if (fit_requested || !out.fit.empty())
    for (auto& [line, what] : unreadable) add(line, std::move(what));
  if (problems.empty() && !out.fit.empty() && !value_lines.empty()) {
    for (size_t l : value_lines)
      add(l,
          "this file mixes entries with values and entries to fit; put the entries with "
          "\"value\" in a file of their own");
  }
  if (problems.empty() && fit_requested && out.fit.empty()) add(0, "no entries to fit");
  problems.ThrowIfAny([&](size_t n) {
    return std::to_string(n) + " bad entr" + (n == 1 ? "y" : "ies") + " in " + path;
  });
  return out;
}

}  // namespace engram::table
