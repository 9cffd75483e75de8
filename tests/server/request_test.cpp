// The request parser: every field's type and range errors name the field,
// and the accepted forms give the documented values.
#include "server/request.h"

#include <gtest/gtest.h>

namespace llmc::server {
namespace {

GenerationRequest parseOk(const std::string &body, Endpoint endpoint = Endpoint::Completions) {
  GenerationRequest request;
  auto error = parseGenerationRequest(body, endpoint, RequestLimits(), request);
  EXPECT_FALSE(error.has_value()) << body << " -> " << (error ? error->message : "");
  return request;
}

ApiError parseError(const std::string &body, Endpoint endpoint = Endpoint::Completions) {
  GenerationRequest request;
  auto error = parseGenerationRequest(body, endpoint, RequestLimits(), request);
  if (!error) {
    ADD_FAILURE() << "accepted: " << body;
    return ApiError();
  }
  return *error;
}

TEST(ServerRequest, PromptForms) {
  GenerationRequest text = parseOk(R"({"prompt": "hi"})");
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_FALSE(text.prompts[0].isTokens);
  EXPECT_EQ(text.prompts[0].text, "hi");
  GenerationRequest texts = parseOk(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b");
  GenerationRequest ids = parseOk(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].isTokens);
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int64_t>{1, 2, 3}));
  GenerationRequest lists = parseOk(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int64_t>{2, 3}));
}

TEST(ServerRequest, Defaults) {
  GenerationRequest r = parseOk(R"({"prompt": "x", "max_tokens": null, "seed": null})");
  EXPECT_FALSE(r.maxTokens.has_value());
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_TRUE(r.skipSpecialTokens);
}

TEST(ServerRequest, AllFields) {
  GenerationRequest r = parseOk(
      R"({"model": "m", "prompt": "x", "max_tokens": 32.0, "temperature": 0, "top_p": 0.5,
          "top_k": -1, "min_p": 0.1, "repetition_penalty": 1.2, "presence_penalty": -2,
          "frequency_penalty": 2, "seed": 18446744073709551615, "n": 3, "stream": true,
          "stream_options": {"include_usage": true}, "stop": "END", "logprobs": 5,
          "echo": true, "ignore_eos": true, "min_tokens": 4, "stop_token_ids": [7],
          "user": "ignored", "unknown_field": {"x": 1}})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.maxTokens, 32);
  EXPECT_EQ(r.topK, 0);
  EXPECT_FLOAT_EQ(r.topP, 0.5f);
  EXPECT_EQ(r.seed, UINT64_MAX);
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.includeUsage);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.topLogprobs, 5);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.ignoreEos);
  EXPECT_EQ(r.minTokens, 4);
  EXPECT_EQ(r.stopTokenIds, std::vector<int64_t>{7});
}

TEST(ServerRequest, Chat) {
  GenerationRequest r = parseOk(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                     {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null}],
          "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 2})",
      Endpoint::ChatCompletions);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.maxTokens, 5);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.topLogprobs, 2);
}

struct BadCase {
  const char *body;
  const char *param; // the field the error must name ("" for none)
  Endpoint endpoint = Endpoint::Completions;
};

TEST(ServerRequest, BadRequestMatrix) {
  const Endpoint chat = Endpoint::ChatCompletions;
  const BadCase cases[] = {
      {"", ""},
      {"{", ""},
      {"[1]", ""},
      {"{\"prompt\": \"a\", \"prompt\": \"b\"}", ""}, // duplicate key
      {"{\"prompt\": \"\xff\"}", ""},                // invalid UTF-8
      {"{}", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": [[]]})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": [1, "a"]})", "prompt"},
      {R"({"prompt": ["a", [1]]})", "prompt"},
      {R"({"prompt": [-1]})", "prompt"},
      {R"({"prompt": [1.5]})", "prompt"},
      {R"({"prompt": [4294967296]})", "prompt"},
      {R"({"prompt": "a", "model": 3})", "model"},
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": "16"})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 1e300})", "max_tokens"},
      {R"({"prompt": "a", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "a", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "top_p": 0})", "top_p"},
      {R"({"prompt": "a", "top_p": 1.01})", "top_p"},
      {R"({"prompt": "a", "top_k": -2})", "top_k"},
      {R"({"prompt": "a", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "a", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "a", "frequency_penalty": -2.5})", "frequency_penalty"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "n": 129})", "n"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "a", "stream": true, "stream_options": 1})", "stream_options"},
      {R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage"},
      {R"({"prompt": "a", "stop": 1})", "stop"},
      {R"({"prompt": "a", "stop": [""]})", "stop"},
      {R"({"prompt": "a", "stop": ["a", 2]})", "stop"},
      {R"({"prompt": "a", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
       "stop"},
      {R"({"prompt": "a", "seed": "x"})", "seed"},
      {R"({"prompt": "a", "seed": 1.5})", "seed"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"prompt": "a", "echo": 1})", "echo"},
      {R"({"prompt": "a", "ignore_eos": "no"})", "ignore_eos"},
      {R"({"prompt": "a", "min_tokens": -1})", "min_tokens"},
      {R"({"prompt": "a", "max_tokens": 4, "min_tokens": 5})", "min_tokens"},
      {R"({"prompt": "a", "stop_token_ids": [-3]})", "stop_token_ids"},
      {R"({"prompt": "a", "best_of": 3})", "best_of"},
      {R"({"prompt": "a", "suffix": "z"})", "suffix"},
      {"{}", "messages", chat},
      {R"({"messages": []})", "messages", chat},
      {R"({"messages": "hi"})", "messages", chat},
      {R"({"messages": [1]})", "messages[0]", chat},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role", chat},
      {R"({"messages": [{"role": "king", "content": "x"}]})", "messages[0].role", chat},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", chat},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content", chat},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", "logprobs", chat},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs",
       chat},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
       "max_completion_tokens", chat},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "tools", chat},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.body);
    ApiError error = parseError(c.body, c.endpoint);
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.param, c.param);
    EXPECT_FALSE(error.message.empty());
    nlohmann::json body = nlohmann::json::parse(error.body());
    ASSERT_TRUE(body.contains("error"));
    EXPECT_EQ(body["error"]["type"], "BadRequestError");
    EXPECT_EQ(body["error"]["code"], 400);
    EXPECT_TRUE(body["error"].contains("param"));
    EXPECT_TRUE(body["error"]["message"].is_string());
  }
}

TEST(ServerRequest, DeepNestingIsRejectedNotRecursed) {
  std::string body = "{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  ApiError error = parseError(body);
  EXPECT_EQ(error.status, 400);
  EXPECT_NE(error.message.find("nesting"), std::string::npos) << error.message;
}

TEST(ServerRequest, ErrorMessagesNameTheValue) {
  ApiError error = parseError(R"({"prompt": "a", "temperature": 9})");
  EXPECT_NE(error.message.find("temperature"), std::string::npos);
  EXPECT_NE(error.message.find("9"), std::string::npos);
  EXPECT_NE(error.message.find("[0, 2]"), std::string::npos) << error.message;
}

} // namespace
} // namespace llmc::server
