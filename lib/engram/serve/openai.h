// The OpenAI request and response shapes serve speaks (schemas/http_api.md): a completion or chat
// request parsed into a Job, and the JSON of replies, stream chunks and errors (nlohmann-json).
// Internal to libengram_serve.so.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engram/model/session.h"
#include "engram/serve/scheduler.h"

namespace engram::serve {

// {"error": {"code", "message", "type", "param"}}.
nlohmann::json ErrorBody(int code, const std::string& message, const std::string& type);

using model::kMinTemperature;  // requests below it are sampled greedily (schemas/http_api.md)

// Parses a /v1/completions (chat = false) or /v1/chat/completions body into job (its chat,
// stream, include_usage and req fields). Strict: integer fields must be JSON integers (not 1.9,
// 1e3 or true) within their range, numbers finite, booleans booleans. Returns "" or what is wrong
// with the request, with the fix (an HTTP 400 message).
std::string ParseRequest(const std::string& body, bool chat, Job* job);

// The reply objects. model_name: the session's; fingerprint: system_fingerprint.
struct ReplyShape {
  std::string model_name, fingerprint;
};
// The non-streamed reply: choices, usage and the engram object.
nlohmann::json FinalBody(const Job& job, const ReplyShape& shape);
// A stream chunk carrying `piece`, or with finish set, the closing chunk.
nlohmann::json Chunk(const Job& job, const ReplyShape& shape, const std::string& piece,
                     const char* finish);
// The usage chunk sent last when stream_options.include_usage is set.
nlohmann::json UsageChunk(const Job& job, const ReplyShape& shape);

}  // namespace engram::serve
