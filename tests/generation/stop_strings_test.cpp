// StopStrings on text pieces: held back while a match is pending, the stop
// removed, the first match in the text winning.
#include "generation/stop_strings.h"

#include <gtest/gtest.h>

namespace llmc::generation {
namespace {

// Pushes each piece; returns the text shown (until the stop) and whether it stopped.
std::pair<std::string, bool> run(StopStrings &stops, const std::vector<std::string> &pieces) {
  std::string shown;
  for (const std::string &piece : pieces) {
    StopStrings::Piece out = stops.push(piece);
    shown += out.text;
    if (out.stopped)
      return {shown, true};
  }
  return {shown + stops.flush(), false};
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  StopStrings stops;
  EXPECT_TRUE(stops.empty());
  EXPECT_EQ(stops.push("abc").text, "abc");
  EXPECT_EQ(stops.flush(), "");
}

TEST(StopStrings, AStopSplitOverPiecesIsRemoved) {
  StopStrings stops({"\nUser:"});
  EXPECT_EQ(stops.push("Hi there").text, "Hi there");
  EXPECT_EQ(stops.push("!\nUs").text, "!"); // "\nUs" may start the stop
  StopStrings::Piece last = stops.push("er: more");
  EXPECT_TRUE(last.stopped);
  EXPECT_EQ(last.text, "");
  EXPECT_EQ(stops.matched(), "\nUser:");
  EXPECT_TRUE(stops.push("anything").text.empty());
  EXPECT_EQ(stops.flush(), "");
}

TEST(StopStrings, APartialMatchThatFailsIsReleased) {
  StopStrings stops({"STOP"});
  EXPECT_EQ(stops.push("aST").text, "a");
  EXPECT_EQ(stops.push("OX").text, "STOX");
  EXPECT_EQ(stops.push("S").text, "");
  EXPECT_EQ(stops.flush(), "S");
}

TEST(StopStrings, TheEarliestStopWinsThenTheLongest) {
  StopStrings a({"cd", "b"});
  EXPECT_EQ(run(a, {"abcd"}), std::make_pair(std::string("a"), true));
  EXPECT_EQ(a.matched(), "b");
  StopStrings b({"ab", "abc"});
  EXPECT_EQ(run(b, {"xabcz"}), std::make_pair(std::string("x"), true));
  EXPECT_EQ(b.matched(), "abc");
  // Several stops pending: the longest possible start is held.
  StopStrings c({"xyz", "yq"});
  EXPECT_EQ(c.push("axy").text, "a");
  EXPECT_EQ(c.push("q").text, "x");
  EXPECT_TRUE(c.stopped());
}

TEST(StopStrings, OnePieceAtATimeCharacters) {
  StopStrings stops({"</s>", "###"});
  EXPECT_EQ(run(stops, {"a", "#", "#", "b", "<", "/", "s", ">", "c"}),
            std::make_pair(std::string("a##b"), true));
}

TEST(StopStrings, BeforeMinTokensNothingStopsButStartsAreHeld) {
  StopStrings stops({"END"});
  StopStrings::Piece early = stops.push("xEND", /*mayStop=*/false);
  EXPECT_FALSE(early.stopped);
  EXPECT_EQ(early.text, "xEND");
  EXPECT_EQ(stops.push("E", false).text, "");
  StopStrings::Piece late = stops.push("ND!", true);
  EXPECT_TRUE(late.stopped);
  EXPECT_EQ(late.text, "");
}

TEST(StopStrings, EmptyStopsAreIgnoredAndMultiByteStopsKeepUtf8Whole) {
  StopStrings stops({"", "中文"});
  EXPECT_FALSE(stops.empty());
  EXPECT_EQ(stops.push("é中").text, "é"); // held: 中 may start 中文
  EXPECT_EQ(stops.push("国").text, "中国");
  EXPECT_TRUE(stops.push("中文").stopped);
}

} // namespace
} // namespace llmc::generation
