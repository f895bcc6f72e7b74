// OpenAI request parsing and reply JSON.
#include "engram/serve/openai.h"

#include <cmath>
#include <ctime>
#include <random>
#include <stdexcept>

namespace engram::serve {

using nlohmann::json;

namespace {

json EngramObject(const model::GenerateResult& r) {
  const uint64_t l = r.prompt_lookups + r.gen_lookups, h = r.prompt_hits + r.gen_hits;
  auto part = [](uint64_t lk, uint64_t ht) {
    return json{{"lookups", lk}, {"hits", ht}, {"misses", lk - ht}, {"hit_rate", HitRate(ht, lk)}};
  };
  return json{{"lookups", l},
              {"hits", h},
              {"misses", l - h},
              {"bypass", r.bypass},
              {"hit_rate", HitRate(h, l)},
              {"prompt", part(r.prompt_lookups, r.prompt_hits)},
              {"generated", part(r.gen_lookups, r.gen_hits)},
              {"table_generation", r.table.generation},
              {"journal_commits", r.table.journal_commits},
              {"journal_entries", r.table.journal_entries},
              {"table_stale", r.table.stale}};
}

json Usage(const model::GenerateResult& r) {
  return json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", r.completion_tokens},
              {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

json Envelope(const Job& job, const ReplyShape& shape, bool chunk) {
  return json{{"id", (job.chat ? "chatcmpl-" : "cmpl-") + std::to_string(job.id)},
              {"object", job.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"model", shape.model_name},
              {"system_fingerprint", shape.fingerprint}};
}

}  // namespace

json ErrorBody(int code, const std::string& message, const std::string& type) {
  return json{
      {"error", {{"code", code}, {"message", message}, {"type", type}, {"param", nullptr}}}};
}

namespace {

// Field readers: "" or what is wrong. Absent and null fields keep *out.
std::string IntField(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return "";
  const std::string range = std::string(key) + " must be an integer from " + std::to_string(lo) +
                            " to " + std::to_string(hi) + " (got " + it->dump() + ")";
  if (!it->is_number_integer()) return range;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return range;
    *out = static_cast<int64_t>(u);
  } else {
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) return range;
    *out = v;
  }
  return "";
}

std::string NumberField(const json& body, const char* key, double* out) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return "";
  if (!it->is_number() || !std::isfinite(it->get<double>()))
    return std::string(key) + " must be a finite number (got " + it->dump() + ")";
  *out = it->get<double>();
  return "";
}

std::string BoolField(const json& obj, const char* key, bool* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_boolean())
    return std::string(key) + " must be true or false (got " + it->dump() + ")";
  *out = it->get<bool>();
  return "";
}

std::string TextOf(const json& v, const char* what, std::string* out) {
  if (!v.is_string()) return std::string(what) + " must be a string";
  *out = v.get<std::string>();
  return "";
}

// The whole request but its shape errors (json exceptions), which the caller words.
std::string ParseFields(const json& body, bool chat, Job* job) {
  std::string bad;
  job->chat = chat;
  if (chat) {
    const json& msgs = body.at("messages");
    if (!msgs.is_array() || msgs.empty()) return "messages must be a non-empty array";
    std::string p;
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (!msgs[i].is_object()) return "messages[" + std::to_string(i) + "] must be an object";
      const json& c = msgs[i].at("content");
      std::string part_text;
      if (c.is_string()) {
        part_text = c.get<std::string>();
      } else if (c.is_array()) {  // [{"type":"text","text":...}, ...]
        for (const auto& part : c) {
          if (!part.is_object()) return "a content part must be an object";
          if (part.value("type", "") != "text") continue;
          std::string t;
          if (!(bad = TextOf(part.at("text"), "a text part's text", &t)).empty()) return bad;
          part_text += t;
        }
      } else {
        return "messages[" + std::to_string(i) + "].content must be a string or an array of parts";
      }
      p += (i ? "\n" : "") + part_text;
    }
    job->req.prompt = p;
  } else {
    const json& pr = body.at("prompt");
    if (pr.is_array()) {
      if (pr.size() != 1) return "prompt must be a string or an array of one string";
      bad = TextOf(pr[0], "prompt", &job->req.prompt);
    } else {
      bad = TextOf(pr, "prompt", &job->req.prompt);
    }
    if (!bad.empty()) return bad;
  }
  constexpr int64_t kIntMax = 2147483647;
  int64_t max_tokens = 64, top_k = 40, n = 1;
  const char* tokens_key = body.contains("max_tokens") && !body["max_tokens"].is_null()
                               ? "max_tokens"
                               : "max_completion_tokens";
  if (!(bad = IntField(body, tokens_key, 0, kIntMax, &max_tokens)).empty()) return bad;
  if (!(bad = IntField(body, "top_k", 0, kIntMax, &top_k)).empty()) return bad;
  if (!(bad = IntField(body, "n", 1, kIntMax, &n)).empty()) return bad;
  if (n != 1)
    return "n = " + std::to_string(n) + " is not supported; this server returns one choice (n = 1)";
  job->req.max_tokens = static_cast<int>(max_tokens);
  job->req.top_k = static_cast<int>(top_k);
  double temperature = 0.8, top_p = 0.95;
  if (!(bad = NumberField(body, "temperature", &temperature)).empty()) return bad;
  if (!(bad = NumberField(body, "top_p", &top_p)).empty()) return bad;
  if (temperature < 0)
    return "temperature must be >= 0 (got " + body["temperature"].dump() + "); 0 is greedy";
  if (!(top_p > 0 && top_p <= 1))
    return "top_p must be in (0, 1] (got " + body["top_p"].dump() + ")";
  job->req.temperature = temperature < kMinTemperature ? 0.0 : temperature;
  job->req.top_p = top_p;
  if (const auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return "seed must be an integer (got " + it->dump() + ")";
    job->req.seed =
        it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  } else {
    job->req.seed = std::random_device{}();
  }
  if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      job->req.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return "stop must be a string or an array of strings";
        job->req.stop.push_back(s.get<std::string>());
      }
    } else {
      return "stop must be a string or an array of strings";
    }
  }
  if (!(bad = BoolField(body, "stream", &job->stream)).empty()) return bad;
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return "stream_options must be an object";
    if (!(bad = BoolField(*it, "include_usage", &job->include_usage)).empty()) return bad;
  }
  return "";
}

}  // namespace

std::string ParseRequest(const std::string& text, bool chat, Job* job) {
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return "the request body is not a JSON object";
  try {
    return ParseFields(body, chat, job);
  } catch (const std::exception& e) {
    return std::string("invalid request: ") + e.what() +
           (chat ? "; send {\"messages\":[{\"role\":\"user\",\"content\":\"...\"}]}"
                 : "; send {\"prompt\":\"...\"}");
  }
}

json FinalBody(const Job& job, const ReplyShape& shape) {
  json j = Envelope(job, shape, false);
  const auto& r = job.result;
  json choice = {{"index", 0}, {"finish_reason", r.finish_reason}, {"logprobs", nullptr}};
  if (job.chat)
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  j["choices"] = json::array({choice});
  j["usage"] = Usage(r);
  j["engram"] = EngramObject(r);
  return j;
}

json Chunk(const Job& job, const ReplyShape& shape, const std::string& piece, const char* finish) {
  json j = Envelope(job, shape, true);
  json choice = {{"index", 0}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (job.chat)
    choice["delta"] = finish ? json::object() : json{{"content", piece}};
  else
    choice["text"] = piece;
  j["choices"] = json::array({choice});
  return j;
}

json UsageChunk(const Job& job, const ReplyShape& shape) {
  json j = Envelope(job, shape, true);
  j["choices"] = json::array();
  j["usage"] = Usage(job.result);
  j["engram"] = EngramObject(job.result);
  return j;
}

}  // namespace engram::serve
