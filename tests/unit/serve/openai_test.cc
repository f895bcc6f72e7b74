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
  CHECK(ParseRequest(R"({"prompt":"x","top_p":0})", false, &job).find("top_p must be in (0, 1]") !=
        std::string::npos);
}

TEST_CASE("integer fields must be integers within range, numbers finite, flags booleans") {
  auto why = [](const std::string& body) {
    Job job;
    return ParseRequest(body, false, &job);
  };
  CHECK(why(R"({"prompt":"x","max_tokens":4294967297})") ==
        "max_tokens must be an integer from 0 to 2147483647 (got 4294967297)");
  CHECK(why(R"({"prompt":"x","max_tokens":1.9})").find("max_tokens must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","max_tokens":1.0})").find("max_tokens must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","max_tokens":true})").find("max_tokens must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","max_tokens":"5"})").find("max_tokens must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","max_completion_tokens":-3})")
            .find("max_completion_tokens must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","top_k":-1})").find("top_k must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","n":1.5})").find("n must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","seed":0.5})").find("seed must be an integer") == 0);
  CHECK(why(R"({"prompt":"x","temperature":"hot"})").find("temperature must be a finite") == 0);
  CHECK(why(R"({"prompt":"x","temperature":true})").find("temperature must be a finite") == 0);
  CHECK(why(R"({"prompt":"x","temperature":1e999})") != "");  // refused by the JSON parser
  CHECK(why(R"({"prompt":"x","temperature":-0.1})").find("temperature must be >= 0") == 0);
  CHECK(why(R"({"prompt":"x","stream":1})") == "stream must be true or false (got 1)");
  CHECK(why(R"({"prompt":"x","stop":[1]})") == "stop must be a string or an array of strings");
  CHECK(why(R"({"prompt":7})") == "prompt must be a string");
  CHECK(why(R"({"prompt":"x","max_tokens":null,"max_completion_tokens":9})") == "");

  Job job;
  CHECK(ParseRequest(R"({"prompt":"x","max_tokens":2147483647,"seed":-1,"top_k":0})", false,
                     &job) == "");
  CHECK(job.req.max_tokens == 2147483647);
  CHECK(job.req.seed == UINT64_MAX);
}

TEST_CASE("temperatures below the floor are greedy") {
  Job tiny, floor, warm;
  CHECK(ParseRequest(R"({"prompt":"x","temperature":1e-39})", false, &tiny) == "");
  CHECK(tiny.req.temperature == 0);
  CHECK(ParseRequest(R"({"prompt":"x","temperature":0.001})", false, &floor) == "");
  CHECK(floor.req.temperature == kMinTemperature);
  CHECK(ParseRequest(R"({"prompt":"x","temperature":2})", false, &warm) == "");
  CHECK(warm.req.temperature == 2);
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
