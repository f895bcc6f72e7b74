// What build and merge share once owners are chosen: the writer's options, the options a part
// file records for the merge, the PROVENANCE document, and the values, provenance and commit of
// the table. Internal to the builder.
#pragma once

#include <cstdint>
#include <string>

#include "engram/base/json.h"
#include "engram/base/reporter.h"
#include "engram/builder/build.h"
#include "engram/builder/token_stream.h"
#include "engram/format/writer.h"

namespace engram::builder {

// The creator recorded in PROVENANCE.
inline constexpr const char* kVersionString = "engramctl 0.1.0";

// The build options a part file records (values, init, owners, layout of sections), and back.
base::Json OptionsJson(const BuildOptions& o);
void ApplyOptionsJson(const base::Json& j, BuildOptions* o);

// How build and merge write the table of options `o`.
format::WriterOptions WriterOptionsFor(const BuildOptions& o, int threads);

// The PROVENANCE section's JSON: creator, command, inputs, owner mode, token counts.
std::string Provenance(const BuildOptions& o, const TokenStreamStats& st, uint64_t created);

// Values, provenance (with the corpus hit rate from STATS) and commit: everything after owners.
void FinishTable(format::TableWriter& writer, const format::Layout& layout, const BuildOptions& o,
                 const std::string& provenance, int threads, BuildResult* res,
                 base::Reporter& reporter);

}  // namespace engram::builder
