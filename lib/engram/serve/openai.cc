// OpenAI request parsing and reply JSON.
#include "engram/serve/openai.h"

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

std::string ParseRequest(const std::string& text, bool chat, Job* job) {
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return "the request body is not a JSON object";
  try {
    job->chat = chat;
    if (chat) {
      const json& msgs = body.at("messages");
      if (!msgs.is_array() || msgs.empty()) throw std::invalid_argument("messages");
      std::string p;
      for (size_t i = 0; i < msgs.size(); ++i) {
        const json& c = msgs[i].at("content");
        std::string part_text;
        if (c.is_string()) {
          part_text = c.get<std::string>();
        } else {  // [{"type":"text","text":...}, ...]
          for (const auto& part : c)
            if (part.value("type", "") == "text") part_text += part.at("text").get<std::string>();
        }
        p += (i ? "\n" : "") + part_text;
      }
      job->req.prompt = p;
    } else {
      const json& pr = body.at("prompt");
      if (pr.is_array()) {
        if (pr.size() != 1) throw std::invalid_argument("prompt");
        job->req.prompt = pr[0].get<std::string>();
      } else {
        job->req.prompt = pr.get<std::string>();
      }
    }
    job->req.max_tokens = body.value("max_tokens", body.value("max_completion_tokens", 64));
    job->req.temperature = body.value("temperature", 0.8);
    job->req.top_p = body.value("top_p", 0.95);
    job->req.top_k = body.value("top_k", 40);
    if (body.contains("seed") && !body["seed"].is_null())
      job->req.seed = body["seed"].get<uint64_t>();
    else
      job->req.seed = std::random_device{}();
    if (body.contains("stop") && !body["stop"].is_null()) {
      if (body["stop"].is_string())
        job->req.stop.push_back(body["stop"].get<std::string>());
      else
        for (const auto& s : body["stop"]) job->req.stop.push_back(s.get<std::string>());
    }
    if (body.value("n", 1) != 1)
      return "n = " + std::to_string(body.value("n", 1)) +
             " is not supported; this server returns one choice (n = 1)";
    job->stream = body.value("stream", false);
    if (body.contains("stream_options") && body["stream_options"].is_object())
      job->include_usage = body["stream_options"].value("include_usage", false);
  } catch (const std::exception& e) {
    return std::string("invalid request: ") + e.what() +
           (chat ? "; send {\"messages\":[{\"role\":\"user\",\"content\":\"...\"}]}"
                 : "; send {\"prompt\":\"...\"}");
  }
  if (job->req.max_tokens < 0 || job->req.temperature < 0 || job->req.top_p <= 0 ||
      job->req.top_p > 1)
    return "max_tokens must be >= 0, temperature >= 0 and top_p in (0, 1]";
  return "";
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
