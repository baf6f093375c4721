// Copyright 2026 The kvstore Authors.
//
// Tests of PreprocessArgs(), kvctl's rewriting of argv before absl parses
// it, against a fixed table of flag kinds (no absl flags involved).

#include "client/kvctl/kvctl_args.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using ::testing::ElementsAre;

// A stand-in for kvctl's flags: two booleans and four value-taking flags.
FlagKind TestFlagKind(absl::string_view name) {
  static const auto* const kinds = new std::map<std::string, FlagKind>{
      {"json", FlagKind::kBool},
      {"preload", FlagKind::kBool},
      {"value_size", FlagKind::kTakesValue},
      {"get_ratio", FlagKind::kTakesValue},
      {"prefix", FlagKind::kTakesValue},
      {"server", FlagKind::kTakesValue},
  };
  auto it = kinds->find(std::string(name));
  return it == kinds->end() ? FlagKind::kUnknown : it->second;
}

// PreprocessArgs with the table above.
PreprocessedArgs Pre(std::vector<std::string> argv) { return PreprocessArgs(argv, &TestFlagKind); }

// Hyphens become underscores in names, whatever the number of dashes;
// values ("0.5") are untouched and the flags are recorded as given.
TEST(PreprocessArgsTest, RewritesHyphenatedNames) {
  PreprocessedArgs p = Pre({"kvctl", "bench", "--value-size=1k", "--get-ratio", "0.5", "-json"});
  EXPECT_THAT(p.argv,
              ElementsAre("kvctl", "bench", "--value_size=1k", "--get_ratio", "0.5", "-json"));
  EXPECT_THAT(p.given, ElementsAre("get_ratio", "json", "value_size"));
  EXPECT_FALSE(p.help);
}

// All three spellings of a negated boolean reach absl as --noNAME, and
// count as giving NAME.
TEST(PreprocessArgsTest, NegatedBooleans) {
  PreprocessedArgs p = Pre({"kvctl", "--no-preload", "--nojson", "--no_json", "bench"});
  EXPECT_THAT(p.argv, ElementsAre("kvctl", "--nopreload", "--nojson", "--nojson", "bench"));
  EXPECT_THAT(p.given, ElementsAre("json", "preload"));
}

TEST(PreprocessArgsTest, ValuesArePassedThroughUntouched) {
  // The argument after a value-taking flag is its value even if it looks
  // like a flag; a bool flag consumes nothing.
  PreprocessedArgs p = Pre({"kvctl", "scan", "--prefix", "--value-size", "--json", "x-y"});
  EXPECT_THAT(p.argv, ElementsAre("kvctl", "scan", "--prefix", "--value-size", "--json", "x-y"));
  EXPECT_THAT(p.given, ElementsAre("json", "prefix"));
}

// A lone "-" is a positional (stdin for put), and after "--" nothing is a
// flag, not even a help flag.
TEST(PreprocessArgsTest, PositionalsAndTerminator) {
  PreprocessedArgs p =
      Pre({"kvctl", "put", "-", "--", "--value-size=1", "-h", "--help", "a-b", "--server"});
  EXPECT_THAT(p.argv, ElementsAre("kvctl", "put", "-", "--", "--value-size=1", "-h", "--help",
                                  "a-b", "--server"));
  EXPECT_TRUE(p.given.empty());
  EXPECT_FALSE(p.help);  // help flags after "--" are positionals
}

// Unknown names, negated or not, pass through unchanged so that absl's
// error message quotes what the user typed.
TEST(PreprocessArgsTest, UnknownFlagsAreLeftForAbsl) {
  PreprocessedArgs p = Pre({"kvctl", "--bogus-flag=1", "--no-such", "--nojunk", "get", "k"});
  EXPECT_THAT(p.argv, ElementsAre("kvctl", "--bogus-flag=1", "--no-such", "--nojunk", "get", "k"));
  EXPECT_TRUE(p.given.empty());
}

// Every help spelling is caught (kvctl prints its own help), but not a
// bare "h" or a flag value that happens to read "--help".
TEST(PreprocessArgsTest, DetectsHelp) {
  for (const char* flag : {"-h", "--help", "-help", "--helpfull", "--helpshort", "--help=true"}) {
    EXPECT_TRUE(Pre({"kvctl", "get", flag}).help) << flag;
  }
  EXPECT_FALSE(Pre({"kvctl", "get", "h"}).help);
  // "--help" as the value of --prefix is a value.
  EXPECT_FALSE(Pre({"kvctl", "scan", "--prefix", "--help"}).help);
}

TEST(PreprocessArgsTest, TrailingValueFlagWithoutValue) {
  // absl reports the missing value; nothing is invented here.
  PreprocessedArgs p = Pre({"kvctl", "get", "--server"});
  EXPECT_THAT(p.argv, ElementsAre("kvctl", "get", "--server"));
}

}  // namespace
}  // namespace client
}  // namespace kvstore
