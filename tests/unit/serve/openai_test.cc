// serve's OpenAI request parsing and reply shapes (engram::serve, openai.cc): what a completion
// or chat body becomes, what is refused with a message, and the reply JSON.
#include "engram/serve/openai.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

using namespace engram::serve;
using nlohmann::json;

TEST_CASE("a completion body becomes a request with OpenAI's defaults") {
  Job job;
  CHECK(ParseRequest(R"({"prompt":"The jury said","max_tokens":5,"temperature":0,"seed":7})", false,
                     &job) == "");
  CHECK(job.req.prompt == "The jury said");
  CHECK(job.req.max_tokens == 5);
  CHECK(job.req.temperature == 0);
  CHECK(job.req.seed == 7);
  CHECK(!job.stream);
  Job one;
  CHECK(ParseRequest(R"({"prompt":["only one"]})", false, &one) == "");
  CHECK(one.req.prompt == "only one");
  CHECK(one.req.max_tokens == 64);
}

TEST_CASE("chat messages are joined by newlines, text parts concatenated") {
  Job job;
  CHECK(ParseRequest(R"({"messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"The jury "},{"type":"text","text":"said"}]}],
      "stream":true,"stream_options":{"include_usage":true},"stop":["\n"]})",
                     true, &job) == "");
  CHECK(job.req.prompt == "Be brief.\nThe jury said");
  CHECK(job.chat);
  CHECK(job.stream);
  CHECK(job.include_usage);
  REQUIRE(job.req.stop.size() == 1);
  CHECK(job.req.stop[0] == "\n");
}

TEST_CASE("bad requests are refused with what to send") {
  Job job;
  CHECK(ParseRequest("not json", false, &job) == "the request body is not a JSON object");
  CHECK(ParseRequest("[1]", false, &job) == "the request body is not a JSON object");
  CHECK(ParseRequest(R"({"prompt":"x","n":2})", false, &job).find("n = 2 is not supported") == 0);
  CHECK(ParseRequest(R"({"messages":[]})", true, &job).find("messages") != std::string::npos);
  CHECK(ParseRequest(R"({})", false, &job).find("send {\"prompt\"") != std::string::npos);
  CHECK(ParseRequest(R"({"prompt":"x","max_tokens":-1})", false, &job).find("max_tokens must be") ==
        0);
  CHECK(ParseRequest(R"({"prompt":"x","top_p":0})", false, &job).find("top_p in (0, 1]") !=
        std::string::npos);
}

TEST_CASE("the reply carries choices, usage and the engram object") {
  Job job;
  job.id = 3;
  job.chat = true;
  job.result.text = " was good";
  job.result.finish_reason = "length";
  job.result.prompt_tokens = 4;
  job.result.completion_tokens = 2;
  job.result.prompt_lookups = 8;
  job.result.prompt_hits = 6;
  job.result.table.generation = 2;
  const json j = FinalBody(job, {"demo", "fp"});
  CHECK(j["id"] == "chatcmpl-3");
  CHECK(j["object"] == "chat.completion");
  CHECK(j["model"] == "demo");
  CHECK(j["choices"][0]["message"]["content"] == " was good");
  CHECK(j["usage"]["total_tokens"] == 6);
  CHECK(j["engram"]["hit_rate"] == 0.75);
  CHECK(j["engram"]["table_generation"] == 2);
  const json c = Chunk(job, {"demo", "fp"}, "", "stop");
  CHECK(c["object"] == "chat.completion.chunk");
  CHECK(c["choices"][0]["finish_reason"] == "stop");
  CHECK(ErrorBody(401, "no", "invalid_request_error")["error"]["code"] == 401);
}
