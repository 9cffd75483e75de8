#include "chat_test_util.h"
TEST(ChatUnit, Placeholder) {}
