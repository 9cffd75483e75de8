// Renders each template over each conversation in tests/chat/conversations
// and compares with jinja2's rendering, written by make_renderings.py into
// tests/data/chat/{own,shared}/<template>.json. Own templates always run;
// the ../shared templates skip when ../shared is absent.
#include "chat_test_util.h"

#include <filesystem>
#include <map>

namespace llmc::chat::test {
namespace {

namespace fs = std::filesystem;

std::map<std::string, OrderedJson> loadConversations() {
  std::map<std::string, OrderedJson> out;
  for (const auto &entry : fs::directory_iterator(std::string(LLMC_SOURCE_DIR) + "/tests/chat/conversations"))
    if (entry.path().extension() == ".json")
      out[entry.path().stem().string()] = readJson(entry.path().string());
  return out;
}

// Checks every case of one expected-renderings file; returns how many passed.
void checkTemplate(const std::string &templatePath, const std::string &expectedPath) {
  SCOPED_TRACE(templatePath);
  auto tmpl = parseChatTemplate(readFile(templatePath), fs::path(templatePath).filename().string());
  ASSERT_TRUE(tmpl.isOk()) << tmpl.message();
  OrderedJson expected = readJson(expectedPath);
  ASSERT_TRUE(expected.contains("cases")) << expectedPath;
  auto conversations = loadConversations();
  RenderOptions options;
  options.fixedTimeSeconds = kFixedTime;
  size_t checked = 0;
  for (const auto &c : expected["cases"]) {
    std::string name = c["conversation"].get<std::string>();
    bool generation = c["add_generation_prompt"].get<bool>();
    SCOPED_TRACE(name + (generation ? " +generation" : ""));
    ASSERT_TRUE(conversations.count(name)) << "no conversation " << name;
    const OrderedJson &conversation = conversations[name];
    OrderedJson context = conversation.value("context", OrderedJson::object());
    auto text = renderChatTemplate(**tmpl, conversation["messages"], context, generation, options);
    if (c.contains("error")) {
      ASSERT_FALSE(text.isOk()) << "jinja2 raised '" << c["error"].get<std::string>()
                                << "' but llmc rendered:\n" << *text;
      EXPECT_NE(text.message().find(c["error"].get<std::string>()), std::string::npos)
          << "llmc: " << text.message() << "\njinja2: " << c["error"].get<std::string>();
    } else {
      ASSERT_TRUE(text.isOk()) << text.message();
      EXPECT_EQ(*text, c["output"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

void checkFolder(const std::string &templates, const std::string &expectedDir) {
  size_t files = 0;
  for (const auto &entry : fs::directory_iterator(expectedDir)) {
    if (entry.path().extension() != ".json")
      continue;
    std::string templatePath = templates + "/" + entry.path().stem().string() + ".jinja";
    if (!fs::exists(templatePath)) {
      ADD_FAILURE() << "expected renderings " << entry.path() << " have no template " << templatePath;
      continue;
    }
    checkTemplate(templatePath, entry.path().string());
    ++files;
  }
  EXPECT_GT(files, 0u) << "no expected renderings in " << expectedDir;
}

TEST(ChatGolden, OwnTemplatesMatchJinja2) {
  checkFolder(std::string(LLMC_SOURCE_DIR) + "/tests/chat/templates",
              llmc::test::testDataPath("chat/own"));
}

TEST(ChatGolden, SharedTemplatesMatchJinja2) {
  LLMC_REQUIRE_SHARED("chat_templates");
  checkFolder(llmc::test::sharedPath("chat_templates"), llmc::test::testDataPath("chat/shared"));
}

} // namespace
} // namespace llmc::chat::test
