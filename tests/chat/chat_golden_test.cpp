// The real templates in ../shared/chat_templates against jinja2's renderings
// in tests/data/chat/shared (see chat_renderings.h); skips without ../shared.
#include "chat_renderings.h"

namespace llmc::chat::test {
namespace {

TEST(ChatGolden, SharedTemplatesMatchJinja2) {
  LLMC_REQUIRE_SHARED("chat_templates");
  checkFolder(llmc::test::sharedPath("chat_templates"), llmc::test::testDataPath("chat/shared"));
}

} // namespace
} // namespace llmc::chat::test
