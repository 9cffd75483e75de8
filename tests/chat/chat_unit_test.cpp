// Unit tests of the chat-template engine: one test per construct family
// (expected strings rendered by jinja2 the way transformers configures it,
// see /tests/chat/make_renderings.py), then syntax and runtime errors (each
// names line and column), the sandbox, and each limit.
#include "chat_test_util.h"

#include <thread>

namespace llmc::chat::test {
namespace {

// Ordered, as Python's dicts are: the expected strings print keys in this order.
OrderedJson twoMessages() {
  return *parseOrderedJson(R"([{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi there"}])",
                           "messages");
}

Expected<std::string> render(const std::string &source, const RenderOptions &options = {},
                             const OrderedJson &context = OrderedJson::object(), bool generation = false) {
  LLMC_ASSIGN_OR_RETURN(auto tmpl, parseChatTemplate(source, "t.jinja"));
  return renderChatTemplate(*tmpl, twoMessages(), context, generation, options);
}

void expectRender(const std::string &source, const std::string &expected) {
  auto text = render(source);
  ASSERT_TRUE(text.isOk()) << source << "\n" << text.message();
  EXPECT_EQ(*text, expected) << source;
}

// The error names `t.jinja:<position>` and contains `what`.
void expectError(const std::string &source, const std::string &position, const std::string &what,
                 const RenderOptions &options = {}) {
  auto text = render(source, options);
  ASSERT_FALSE(text.isOk()) << source << " rendered: " << *text;
  EXPECT_EQ(text.message().rfind("t.jinja:" + position + ": ", 0), 0u) << text.message();
  EXPECT_NE(text.message().find(what), std::string::npos) << text.message();
}

TEST(ChatUnit, Statements) {
  expectRender("{% if messages|length > 1 %}many{% elif messages %}one{% else %}none{% endif %}", "many");
  expectRender("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% endfor %}", "1s2u");
  expectRender("{% for m in messages if m.role == 'user' %}{{ loop.length }}{% else %}empty{% endfor %}", "1");
  expectRender("{% for i in range(9) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", "0134");
  expectRender("{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{% endfor %}{{ x }}", "1");
  expectRender("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4");
  expectRender("{% set b %}in {{ messages[0].role }}{% endset %}[{{ b }}]", "[in system]");
  expectRender("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "1B23");
  expectRender("{% macro w() %}({{ caller() }}){% endmacro %}{% call w() %}x{% endcall %}", "(x)");
  expectRender("{% filter upper %}abc{% endfilter %}", "ABC");
  expectRender("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
  expectRender("{% with a = 2 %}{{ a * 2 }}{% endwith %}", "4");
  expectRender("{% generation %}kept{% endgeneration %}", "kept");
}

TEST(ChatUnit, Expressions) {
  expectRender("{{ 7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 }}", "3 2 3.5 64 7");
  expectRender("{{ [1, 'a', none, true] }} {{ {'k': (1,)} }} {{ 0.1 + 0.2 }} {{ 1e20 }}", "[1, 'a', None, True] {'k': (1,)} 0.30000000000000004 1e+20");
  expectRender("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }}", "a1None abab [1, 2]");
  expectRender("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1] }} {{ 0 or 'x' }} {{ 1 and 2 }}", "True True True x 2");
  expectRender("{{ 'y' if true else 'n' }}[{{ 'y' if false }}]", "y[]");
  expectRender("{{ messages[0].role }} {{ messages[-1]['content'][:2] }} {{ 'abc'[::-1] }} {{ messages[0].nope }}", "system Hi cba ");
  expectRender("{{ \"q'uote\" }} {{ 'tab\\there' }} {{ ['it\\'s'] }}", "q'uote tab\there [\"it's\"]");
}

TEST(ChatUnit, Filters) {
  expectRender("{{ '  x ' | trim }}|{{ 'ab' | upper }}|{{ messages | length }}|{{ messages | map(attribute='role') | join(',') }}", "x|AB|2|system,user");
  expectRender("{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | first | attr('x') }}", "1 ");
  expectRender("{{ x | default('d') }} {{ '' | default('e', true) }} {{ [3, 1, 2] | sort | list }} {{ ['a', 'A'] | unique | list }}", "d e [1, 2, 3] ['a']");
  expectRender("{{ {'b': 1, 'a': [1, 'é']} | tojson }} {{ [1] | tojson(indent=2) }}", "{\"b\": 1, \"a\": [1, \"é\"]} [\n  1\n]");
  expectRender("{{ '42' | int + 1 }} {{ 2.5 | round }} {{ 'a-b' | replace('-', '+') }} {{ 3 | string }} {{ 'x\\ny' | indent(2, true) }}", "43 2.0 a+b 3   x\n  y");
  expectRender("{{ {'b': 1, 'a': 2} | dictsort }} {{ {'a': 1} | items | list }} {{ 'a b c' | wordcount }} {{ '%s=%d' | format('a', 1) }}", "[('a', 2), ('b', 1)] [('a', 1)] 3 a=1");
}

TEST(ChatUnit, Methods) {
  expectRender("{{ ' a '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXa'.replace('a', 'b') }}", "a|['a', 'b']|True|True|bXb");
  expectRender("{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'ab cd'.title() }}{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}{{ '-'.join(['a', 'b']) }}", "ABabAb Cd22a-b");
  expectRender("{{ messages[0].get('role') }} {{ messages[0].get('x', 1) }} {{ messages[0].keys() | list }} {{ messages[0].values() | list }} {{ messages[0].items() | list }}", "system 1 ['role', 'content'] ['system', 'Be kind.'] [('role', 'system'), ('content', 'Be kind.')]");
  expectRender("{{ '{}-{name}'.format(1, name='n') }} {{ [1, 2, 2].count(2) }} {{ 'k=v=w'.split('=', 1) }}", "1-n 2 ['k', 'v=w']");
}

TEST(ChatUnit, Tests) {
  expectRender("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}", "FalseTrueTrueTrueTrueTrueTrue");
  expectRender("{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ range is callable }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}", "TrueTrueTrueTrueTrueTrueTrue");
  expectRender("{{ true is true }}{{ false is false }}{{ true is boolean }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 'a' is in 'ab' }}", "TrueTrueTrueTrueTrueTrueTrue");
}

TEST(ChatUnit, Whitespace) {
  expectRender("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", "a\n  b\nc");
  expectRender("a {{- ' b ' -}} c", "a b c");
  expectRender("x\n{#- comment -#}\ny", "xy");
  expectRender("  {%+ if true %}kept indent{% endif %}", "  kept indent");
  expectRender("{% if true +%}\nkept newline{% endif %}", "\nkept newline");
  expectRender("line\r\nwith crlf\r\n{% if true %}\r\nx{% endif %}", "line\nwith crlf\nx");
  expectRender("trailing newline dropped\n", "trailing newline dropped");
}

TEST(ChatUnit, ContextVariablesAndGenerationPrompt) {
  auto tmpl = parseChatTemplate("{{ bos_token }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
                                "{{ enable_thinking }}|{{ tools is defined }}",
                                "t.jinja");
  ASSERT_TRUE(tmpl.isOk()) << tmpl.message();
  auto text = renderChatTemplate(**tmpl, twoMessages(), OrderedJson{{"bos_token", "<s>"}, {"enable_thinking", false}}, true);
  ASSERT_TRUE(text.isOk()) << text.message();
  EXPECT_EQ(*text, "<s>|None|None|True|False|True");
  auto withTools = renderChatTemplate(**tmpl, twoMessages(), OrderedJson{{"tools", OrderedJson::array({1})}}, false);
  ASSERT_TRUE(withTools.isOk()) << withTools.message();
  EXPECT_EQ(*withTools, "|[1]|None|False||True");
}

TEST(ChatUnit, OrderedJsonKeepsKeyOrder) {
  auto tmpl = parseChatTemplate("{{ messages[0] | tojson }} {{ messages[0] }}", "t.jinja");
  ASSERT_TRUE(tmpl.isOk());
  auto messages = parseOrderedJson(R"([{"role": "user", "content": "x", "a": 1}])", "m.json");
  ASSERT_TRUE(messages.isOk()) << messages.message();
  auto text = renderChatTemplate(**tmpl, *messages, OrderedJson::object(), false);
  ASSERT_TRUE(text.isOk()) << text.message();
  EXPECT_EQ(*text, R"({"role": "user", "content": "x", "a": 1} {'role': 'user', 'content': 'x', 'a': 1})");
}

TEST(ChatUnit, StrftimeNowUsesTheFixedMoment) {
  RenderOptions options;
  options.fixedTimeSeconds = kFixedTime;
  auto text = render("{{ strftime_now('%Y-%m-%d %H:%M %d %b %Y') }}", options);
  ASSERT_TRUE(text.isOk()) << text.message();
  EXPECT_EQ(*text, "2025-01-01 12:00 01 Jan 2025");
}

TEST(ChatUnit, ParsedTemplateRendersFromManyThreads) {
  auto tmpl = parseChatTemplate("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}", "t.jinja");
  ASSERT_TRUE(tmpl.isOk());
  std::vector<std::thread> threads;
  std::vector<std::string> results(4);
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 50; ++round) {
        auto text = renderChatTemplate(**tmpl, twoMessages(), OrderedJson::object(), false);
        results[i] = text.isOk() ? *text : text.message();
      }
    });
  for (auto &t : threads)
    t.join();
  for (const auto &r : results)
    EXPECT_EQ(r, "system:Be kind.;user:Hi there;");
}

TEST(ChatErrors, SyntaxErrorsNameLineAndColumn) {
  expectError("ok\n{% if %}", "2:7", "expected an expression");
  expectError("{% for m in messages %}x", "1:25", "'endfor'");
  expectError("line\n  {{ 'unterminated }}", "2:6", "unterminated string");
  expectError("{{ x | no_such_filter }}", "1:8", "no filter named 'no_such_filter'");
  expectError("{{ x is no_such_test }}", "1:9", "no test named 'no_such_test'");
  expectError("{% include 'other.jinja' %}", "1:4", "'include' is not supported");
  expectError("{% do messages.append(1) %}", "1:4", "unknown tag 'do'");
  expectError("{% break %}", "1:4", "'break' outside a for loop");
  expectError("{# never closed", "1:1", "missing end of comment");
  expectError("{{ 1 + }}", "1:8", "where an expression should be");
  expectError("{{ (1, 2 }}", "1:10", "unexpected '}', expected ')'");
  expectError("{% endif %}", "1:4", "unexpected 'endif'");
  expectError("{% macro m(a=1, b) %}{% endmacro %}", "1:18", "non-default argument");
  expectError("{{ 99999999999999999999 }}", "1:4", "does not fit in 64 bits");
}

TEST(ChatErrors, RuntimeErrorsNameLineAndColumn) {
  expectError("{{ raise_exception('Roles must alternate') }}", "1:4",
              "raise_exception: Roles must alternate");
  expectError("\n\n   {{ x.y }}", "3:8", "'x' is undefined");
  expectError("{{ messages[0].nope.deeper }}", "1:20", "'dict object' has no attribute 'nope'");
  expectError("{{ 1 / 0 }}", "1:6", "division by zero");
  expectError("{{ 'a' + 1 }}", "1:8", "can only concatenate str (not \"int\") to str");
  expectError("{{ 'a' < 1 }}", "1:4", "'<' not supported between instances of 'str' and 'int'");
  expectError("{% for x in none %}{% endfor %}", "1:13", "'NoneType' object is not iterable");
  expectError("{% set x = 1 %}{% set x.y = 2 %}", "1:23", "non-namespace object");
  expectError("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "1:34", "takes not more than 1 argument");
  expectError("{% set a, b = [1] %}", "1:8", "not enough values to unpack");
  expectError("{{ none | tojson }}{{ x | tojson }}", "1:27", "Object of type Undefined is not JSON serializable");
  expectError("{{ 9223372036854775807 + 1 }}", "1:24", "integer overflow");
}

TEST(ChatErrors, SandboxRefusesMutationAndPrivateAccess) {
  expectError("{{ messages.append(1) }}", "1:12", "access to attribute 'append' of 'list' object is unsafe.");
  expectError("{{ messages[0].update({}) }}", "1:15", "access to attribute 'update' of 'dict' object is unsafe.");
  expectError("{{ messages.pop() }}", "1:12", "unsafe");
  expectRender("{{ messages.__class__ }}{{ ''.__len__ }}", "");
  expectError("{{ range(100001) | length }}", "1:4", "MAX_RANGE (100000)");
}

TEST(ChatLimits, EachLimitIsAnError) {
  RenderOptions small;
  small.limits.maxOutputBytes = 1000;
  expectError("{% for i in range(600) %}xx{% endfor %}", "1:26", "limits.maxOutputBytes", small);
  expectError("{{ range(2000) | length }}", "1:4", "limits.maxOutputBytes", small);
  expectError("{{ 'x' * 5000 }}", "1:8", "limits.maxOutputBytes", small);
  RenderOptions loops;
  loops.limits.maxLoopIterations = 100;
  expectError("{% for i in range(10) %}{% for j in range(20) %}{% endfor %}{% endfor %}", "1:28",
              "limits.maxLoopIterations", loops);
  RenderOptions calls;
  calls.limits.maxCallDepth = 10;
  expectError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "1:20", "limits.maxCallDepth", calls);
  RenderOptions steps;
  steps.limits.maxSteps = 5000;
  expectError("{% for i in range(100000) %}{% endfor %}", "1:4", "limits.maxSteps", steps);
  // Defaults stop a runaway template too.
  auto text = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(text.isOk());
  EXPECT_NE(text.message().find("limits.maxCallDepth"), std::string::npos) << text.message();
}

TEST(ChatErrors, BadInputs) {
  auto tmpl = parseChatTemplate("{{ messages }}", "t.jinja");
  ASSERT_TRUE(tmpl.isOk());
  auto notArray = renderChatTemplate(**tmpl, Json::object(), Json::object(), false);
  ASSERT_FALSE(notArray.isOk());
  EXPECT_NE(notArray.message().find("messages must be a JSON array"), std::string::npos);
  auto badContext = renderChatTemplate(**tmpl, Json::array(), Json::array(), false);
  ASSERT_FALSE(badContext.isOk());
  EXPECT_NE(badContext.message().find("context must be a JSON object"), std::string::npos);
  auto badJson = parseOrderedJson("[{\"role\": ", "m.json");
  ASSERT_FALSE(badJson.isOk());
  EXPECT_NE(badJson.message().find("m.json: not valid JSON"), std::string::npos);
  std::string deep(300, '[');
  auto tooDeep = parseOrderedJson(deep + std::string(300, ']'), "deep.json");
  EXPECT_FALSE(tooDeep.isOk());
  std::string nested;
  for (int i = 0; i < 400; ++i)
    nested += "(";
  auto tooNested = parseChatTemplate("{{ " + nested + "1" + std::string(400, ')') + " }}", "t.jinja");
  ASSERT_FALSE(tooNested.isOk());
  EXPECT_NE(tooNested.message().find("deeper than 200"), std::string::npos) << tooNested.message();
}

} // namespace
} // namespace llmc::chat::test
