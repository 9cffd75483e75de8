// The own templates (tests/chat/templates) against jinja2's renderings in
// tests/data/chat/own: always run (see chat_renderings.h).
#include "chat_renderings.h"

namespace llmc::chat::test {
namespace {

TEST(ChatRenderings, OwnTemplatesMatchJinja2) {
  checkFolder(std::string(LLMC_SOURCE_DIR) + "/tests/chat/templates",
              llmc::test::testDataPath("chat/own"));
}

} // namespace
} // namespace llmc::chat::test
