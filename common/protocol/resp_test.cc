// Copyright 2026 The kvstore Authors.

#include "common/protocol/resp.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace resp {
namespace {

using Kind = ParsedRequest::Kind;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(ParseRequest, CompleteCommand) {
  static constexpr char kIn[] = "*2\r\n$3\r\nGET\r\n$3\r\nk\0y\r\n*1\r\n$4\r\nPING\r\n";
  const std::string in(kIn, sizeof(kIn) - 1);
  ParsedRequest r = ParseRequest(in, RequestLimits());
  ASSERT_EQ(r.kind, Kind::kCommand) << r.error;
  EXPECT_EQ(r.consumed, 22u);
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[1], absl::string_view("k\0y", 3));
  ParsedRequest next = ParseRequest(absl::string_view(in).substr(r.consumed), RequestLimits());
  ASSERT_EQ(next.kind, Kind::kCommand);
  EXPECT_THAT(next.args, ElementsAre("PING"));
}

TEST(ParseRequest, EveryPrefixOfAValidRequestNeedsMore) {
  const std::string in = "*3\r\n$4\r\nMSET\r\n$1\r\na\r\n$0\r\n\r\n";
  for (size_t n = 0; n < in.size(); ++n) {
    ParsedRequest r = ParseRequest(in.substr(0, n), RequestLimits());
    EXPECT_EQ(r.kind, Kind::kNeedMore) << "prefix " << n << ": " << r.error;
  }
  EXPECT_EQ(ParseRequest(in, RequestLimits()).kind, Kind::kCommand);
}

TEST(ParseRequest, SetValueIsHandedOverUnbuffered) {
  const std::string in = "*3\r\n$3\r\nset\r\n$3\r\nkey\r\n$1000000\r\npartial";
  ParsedRequest r = ParseRequest(in, RequestLimits());
  ASSERT_EQ(r.kind, Kind::kSetValue) << r.error;
  EXPECT_EQ(r.value_len, 1000000u);
  EXPECT_EQ(in.substr(r.consumed), "partial");
  EXPECT_THAT(r.args, ElementsAre("set", "key"));
}

struct Malformed {
  const char* name;
  std::string input;
  const char* message;
};

class MalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedTest, IsAProtocolError) {
  ParsedRequest r = ParseRequest(GetParam().input, RequestLimits());
  EXPECT_EQ(r.kind, Kind::kError) << GetParam().name;
  EXPECT_THAT(r.error, HasSubstr(GetParam().message));
  EXPECT_TRUE(r.args.empty() || r.kind == Kind::kError);
}

INSTANTIATE_TEST_SUITE_P(
    Lengths, MalformedTest,
    ::testing::Values(
        Malformed{"NegativeArray", "*-10\r\n", "invalid multibulk length"},
        Malformed{"NullArray", "*-1\r\n", "invalid multibulk length"},
        Malformed{"ZeroArray", "*0\r\n", "invalid multibulk length"},
        Malformed{"HugeArray", "*3000000000\r\n", "invalid multibulk length"},
        Malformed{"HugeBulk", "*2\r\n$3\r\nGET\r\n$2000000000\r\n", "invalid bulk length"},
        Malformed{"NegativeSetValue", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$-2\r\n",
                  "invalid bulk length"},
        Malformed{"NegativeBulk", "*1\r\n$-5\r\n", "invalid bulk length"},
        Malformed{"NullBulkArg", "*1\r\n$-1\r\n", "invalid bulk length"},
        Malformed{"LettersInBulk", "*1\r\n$abc\r\n", "invalid bulk length"},
        Malformed{"LettersInArray", "*x1\r\n", "invalid multibulk length"},
        Malformed{"EmptyLength", "*\r\n", "invalid multibulk length"},
        Malformed{"PlusSign", "*+1\r\n", "invalid multibulk length"},
        Malformed{"Overflow", "*99999999999999999999999\r\n", "length line too long"},
        Malformed{"NoCrLf", std::string("*1\rX"), "CRLF"},
        Malformed{"LongLine", "*1111111111111111111111111111", "length line too long"},
        Malformed{"HttpPost", "POST / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP request ('POST')"},
        Malformed{"HttpHost", "Host: x\r\n\r\n", "HTTP request ('Host:')"},
        Malformed{"TlsHello", std::string("\x16\x03\x01\x02\x00", 5),
                  "expected '*' or an inline command, got '\\x16'"},
        Malformed{"Binary", std::string("\x00\x01\x02", 3), "got '\\x00'"},
        Malformed{"UnclosedDouble", "ECHO \"abc\r\n", "unbalanced quotes in request"},
        Malformed{"UnclosedSingle", "ECHO 'abc\r\n", "unbalanced quotes in request"},
        Malformed{"TextAfterQuote", "ECHO \"a\"b\r\n", "unbalanced quotes in request"},
        Malformed{"TextAfterSingle", "ECHO 'a'b\r\n", "unbalanced quotes in request"},
        Malformed{"EscapedClosingQuote", "ECHO \"a\\\"\r\n", "unbalanced quotes in request"},
        Malformed{"TooBigInline", std::string(kMaxInlineBytes + 1, 'x'), "too big inline request"},
        Malformed{"TooBigInlineLine", "ECHO " + std::string(kMaxInlineBytes, 'x') + "\r\n",
                  "too big inline request"},
        Malformed{"DigitsThenLetter", "*1x\r\n", "invalid multibulk length"},
        Malformed{"NineteenDigits", "*1234567890123456789\r\n", "invalid multibulk length"},
        Malformed{"BulkDigitsThenCrOnly", "*1\r\n$4\rX", "CRLF"},
        Malformed{"BulkWithoutDollar", "*1\r\n:5\r\n", "expected '$'"},
        Malformed{"BadTerminator", "*1\r\n$4\r\nPINGxx", "not terminated"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

// Length lines are read in one pass when they are plain digits: leading
// zeros and 18 digits (the most a length may have) read as the checking path
// reads them.
TEST(ParseRequest, LengthLinesWithLeadingZerosAndManyDigits) {
  const std::string get = "*002\r\n$003\r\nGET\r\n$0\r\n\r\n";
  const std::string input = get + "*1";  // the views point into it
  ParsedRequest r = ParseRequest(input, RequestLimits());
  ASSERT_EQ(r.kind, Kind::kCommand);
  EXPECT_THAT(r.args, ElementsAre("GET", ""));
  EXPECT_EQ(r.consumed, get.size());
  r = ParseRequest("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999999999999999\r\n", RequestLimits());
  ASSERT_EQ(r.kind, Kind::kSetValue);
  EXPECT_EQ(r.value_len, 999999999999999999u);
}

TEST(ParseRequest, HugeSetValueIsLeftToTheCallersLimit) {
  ParsedRequest r = ParseRequest("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000000\r\n", RequestLimits());
  ASSERT_EQ(r.kind, Kind::kSetValue);
  EXPECT_EQ(r.value_len, 2000000000u);
}

TEST(ParseRequest, TruncatedFramesNeedMoreNotError) {
  for (const char* in : {"*", "*2", "*2\r", "*2\r\n$", "*2\r\n$3\r\nGE", "*2\r\n$3\r\nGET\r\n$3"}) {
    EXPECT_EQ(ParseRequest(in, RequestLimits()).kind, Kind::kNeedMore) << in;
  }
}

TEST(ParseRequest, BufferedRequestSizeIsLimited) {
  RequestLimits limits;
  limits.max_buffered_bytes = 100;
  std::string in = "*3\r\n$4\r\nMSET\r\n$1\r\nk\r\n$200\r\n";
  ParsedRequest r = ParseRequest(in, limits);
  EXPECT_EQ(r.kind, Kind::kError);
  EXPECT_THAT(r.error, HasSubstr("larger than 100"));
}

TEST(ParseRequest, RandomGarbageNeverCrashes) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::string alphabet = "*$\r\n-0123456789abcSETGET";
  for (int i = 0; i < 20000; ++i) {
    std::string in(rng() % 40, ' ');
    for (char& c : in) c = alphabet[rng() % alphabet.size()];
    ParsedRequest r = ParseRequest(in, RequestLimits());
    EXPECT_LE(r.consumed, in.size());
  }
}

TEST(Encode, RoundTripsThroughReplyParser) {
  std::string out;
  AppendSimple(&out, "OK");
  AppendError(&out, "ERR nope");
  AppendInteger(&out, -42);
  AppendBulk(&out, absl::string_view("a\0b", 3));
  AppendNull(&out);
  AppendArrayHeader(&out, 2);
  AppendBulk(&out, "x");
  AppendNull(&out);
  std::vector<Reply::Type> types;
  absl::string_view rest(out);
  while (!rest.empty()) {
    auto r = ParseReply(rest, ReplyLimits());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->complete);
    types.push_back(r->reply.type);
    if (r->reply.type == Reply::Type::kBulk) {
      EXPECT_EQ(r->reply.str, absl::string_view("a\0b", 3));
    }
    if (r->reply.type == Reply::Type::kArray) {
      ASSERT_EQ(r->reply.elements.size(), 2u);
      EXPECT_EQ(r->reply.elements[1].type, Reply::Type::kNull);
    }
    rest.remove_prefix(r->consumed);
  }
  EXPECT_THAT(types, ElementsAre(Reply::Type::kSimple, Reply::Type::kError, Reply::Type::kInteger,
                                 Reply::Type::kBulk, Reply::Type::kNull, Reply::Type::kArray));
}

TEST(ParseReply, PartialAndMalformed) {
  auto r = ParseReply("$5\r\nab", ReplyLimits());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);
  EXPECT_FALSE(ParseReply("$-7\r\n", ReplyLimits()).ok());
  EXPECT_FALSE(ParseReply("?\r\n", ReplyLimits()).ok());
  EXPECT_FALSE(ParseReply("$3\r\nabcXY", ReplyLimits()).ok());
  EXPECT_FALSE(ParseReply("*99999999999\r\n", ReplyLimits()).ok());
}

TEST(Command, RoundTrip) {
  std::string out;
  AppendCommand(&out, {"SET", "k", "v"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

TEST(Encode, ExactBytesOfEveryReplyShape) {
  std::string out;
  AppendOk(&out);
  AppendNull(&out);
  AppendInteger(&out, 7);
  AppendArrayHeader(&out, 0);
  AppendBulkHeader(&out, 3);
  out += "abc";
  AppendBulkTrailer(&out);
  EXPECT_EQ(out, "+OK\r\n$-1\r\n:7\r\n*0\r\n$3\r\nabc\r\n");
}

// The length lines are formatted by hand (not StrAppend): every digit
// count, and the largest length, must come out as decimal.
TEST(Encode, LengthLinesOfEveryDigitCount) {
  uint64_t n = 0;
  for (int digits = 1; digits <= 20; ++digits) {
    for (uint64_t v : {n, n + 1, n * 10 + 9}) {
      std::string bulk, array;
      AppendBulkHeader(&bulk, v);
      AppendArrayHeader(&array, v);
      EXPECT_EQ(bulk, absl::StrCat("$", v, "\r\n"));
      EXPECT_EQ(array, absl::StrCat("*", v, "\r\n"));
    }
    n = n * 10 + 9;
  }
  std::string max;
  AppendBulkHeader(&max, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(max, "$18446744073709551615\r\n");
}

// Requests with more arguments than the inline capacity of args keep all of
// them, in order.
TEST(ParseRequest, ManyArgumentsInOrder) {
  std::string in;
  std::vector<absl::string_view> want = {"MSET", "a", "1", "bb", "22", "ccc", "333", "d", "4"};
  AppendCommand(&in, want);
  ParsedRequest r = ParseRequest(in, RequestLimits());
  ASSERT_EQ(r.kind, ParsedRequest::Kind::kCommand);
  EXPECT_EQ(r.consumed, in.size());
  EXPECT_THAT(r.args, ElementsAreArray(want));
}

TEST(Encode, ErrorLinesCannotCarryCrLf) {
  std::string out = "x";
  AppendError(&out, "ERR unknown command 'a\r\n+OK'");
  EXPECT_EQ(out, "x-ERR unknown command 'a  +OK'\r\n");
}

// Every absl code survives StatusToRespError -> the wire -> RespErrorToStatus.
TEST(StatusMapping, EveryCodeRoundTripsThroughTheWire) {
  for (int i = 1; i <= 16; ++i) {
    const absl::Status in(static_cast<absl::StatusCode>(i), "some message: 42");
    std::string wire;
    AppendStatusError(&wire, in);
    auto r = ParseReply(wire, ReplyLimits());
    ASSERT_TRUE(r.ok() && r->complete) << wire;
    ASSERT_EQ(r->reply.type, Reply::Type::kError);
    EXPECT_EQ(RespErrorToStatus(r->reply.str), in) << wire;
  }
}

TEST(StatusMapping, EmptyMessageRoundTrips) {
  const absl::Status in = absl::DataLossError("");
  EXPECT_EQ(StatusToRespError(in), "DATALOSS ");
  EXPECT_EQ(RespErrorToStatus(StatusToRespError(in)), in);
}

// The words redis-cli users saw before the mapping moved into the codec.
TEST(StatusMapping, WordsSeenByRedisCliAreKept) {
  EXPECT_EQ(StatusToRespError(absl::InvalidArgumentError("key is empty")), "ERR key is empty");
  EXPECT_EQ(StatusToRespError(absl::ResourceExhaustedError("pool full")), "OOM pool full");
  EXPECT_EQ(StatusToRespError(absl::UnavailableError("retry")), "TRYAGAIN retry");
  EXPECT_EQ(StatusToRespError(absl::DataLossError("bad sum")), "DATALOSS bad sum");
  EXPECT_EQ(StatusToRespError(absl::NotFoundError("k")), "NOTFOUND k");
  EXPECT_EQ(StatusToRespError(absl::DeadlineExceededError("slow")), "TIMEOUT slow");
}

TEST(StatusMapping, ClassifiesByFirstWordOnly) {
  // English in the message does not matter, only the code word.
  EXPECT_EQ(RespErrorToStatus("ERR connection timed out").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RespErrorToStatus("OOM over the limit"),
            absl::ResourceExhaustedError("over the limit"));
  EXPECT_EQ(RespErrorToStatus("NOPROTO this server speaks RESP2 only"),
            absl::UnimplementedError("this server speaks RESP2 only"));
  EXPECT_EQ(RespErrorToStatus("WRONGTYPE Operation against a key"),
            absl::UnknownError("WRONGTYPE Operation against a key"));
  EXPECT_EQ(RespErrorToStatus("err lower case is not a code word"),
            absl::UnknownError("err lower case is not a code word"));
  EXPECT_EQ(RespErrorToStatus("OOM"), absl::ResourceExhaustedError("OOM"));
  // A refused AUTH password is an authentication error, not an unknown one.
  EXPECT_EQ(RespErrorToStatus("WRONGPASS invalid username-password pair").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(RespErrorToStatus("").code(), absl::StatusCode::kUnknown);
}

TEST(StatusMapping, OkIsNotAnErrorAndReportsUnknown) {
  EXPECT_EQ(StatusToRespError(absl::OkStatus()), "UNKNOWN ");
}

// Refusals are written and read by the refusal codec: Redis Cluster's
// words, no code word of ours in front, the typed value on the way back.
TEST(StatusMapping, RefusalsInRedisClustersWords) {
  using cluster::Refusal;
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::Moved(12, "n2", "10.0.0.2:6379"))),
            "MOVED 12 10.0.0.2:6379");
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::Ask(3, "n2", "h:1"))), "ASK 3 h:1");
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::TryAgain(7, "retry shortly"))),
            "TRYAGAIN Hash slot 7 retry shortly");
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::ClusterDown("The cluster is down"))),
            "CLUSTERDOWN The cluster is down");
  EXPECT_EQ(
      StatusToRespError(cluster::ToStatus(Refusal::ClusterDown(2, "fenced").WithUnknownEffect())),
      "UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 2 fenced");
  // Not stored on a replica (its pool full): certainly no effect, in the
  // words any RESOURCE_EXHAUSTED gets, and typed again when read back.
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::NotStored("on replica n1: pool full"))),
            "OOM not stored: on replica n1: pool full");
  const absl::Status full = RespErrorToStatus("OOM not stored: on replica n1: pool full");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cluster::FromStatus(full), Refusal::NotStored("on replica n1: pool full"));
  EXPECT_TRUE(cluster::CertainlyNoEffect(full));
  // Redis's own OOM is no refusal of ours.
  EXPECT_FALSE(cluster::FromStatus(RespErrorToStatus("OOM command not allowed")).has_value());
  // A peer-to-peer kind has no RESP form: its code word, as any error.
  EXPECT_EQ(StatusToRespError(cluster::ToStatus(Refusal::MapBehind("x"))),
            "TRYAGAIN map behind: x");
  // Without the payload the words are just a message.
  EXPECT_EQ(StatusToRespError(absl::FailedPreconditionError("MOVED 1 h:1")),
            "PRECONDITION MOVED 1 h:1");

  const absl::Status moved = RespErrorToStatus("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(moved.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster::FromStatus(moved), Refusal::Moved(3999, "", "127.0.0.1:6381"));
  const absl::Status unknown =
      RespErrorToStatus("UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 2 fenced");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(cluster::FromStatus(unknown), Refusal::ClusterDown(2, "fenced").WithUnknownEffect());
  // The word alone, as the generic code of UNAVAILABLE: no refusal.
  const absl::Status busy = RespErrorToStatus("TRYAGAIN busy");
  EXPECT_EQ(busy, absl::UnavailableError("busy"));
  EXPECT_FALSE(cluster::FromStatus(busy).has_value());
}

TEST(StatusMapping, RefusalsRoundTripThroughTheWire) {
  using cluster::Refusal;
  for (const Refusal& r :
       {Refusal::Moved(12, "", "10.0.0.2:6379"), Refusal::Ask(16383, "", "[::1]:7001"),
        Refusal::TryAgain(9, "is being handed to another shard; retry shortly"),
        Refusal::ClusterDown(""), Refusal::ClusterDown(5, "not served"),
        Refusal::TryAgain(1, "x").WithUnknownEffect(), Refusal::NotPublished("INTERNAL: y"),
        Refusal::StaleShardEpoch("z").WithUnknownEffect(), Refusal::NotStored("on replica n1"),
        Refusal::NotStored("w").WithUnknownEffect()}) {
    const absl::Status s = cluster::ToStatus(r);
    std::string wire;
    AppendStatusError(&wire, s);
    auto parsed = ParseReply(wire, ReplyLimits());
    ASSERT_TRUE(parsed.ok() && parsed->complete) << wire;
    const absl::Status back = RespErrorToStatus(parsed->reply.str);
    EXPECT_EQ(back.code(), s.code()) << wire;
    EXPECT_EQ(back.message(), s.message()) << wire;
    EXPECT_EQ(cluster::FromStatus(back), r) << wire;
  }
}

// --- Inline requests ---------------------------------------------------------

// The arguments of one complete inline request, or a description of what
// the parser answered instead.
std::vector<std::string> InlineArgs(absl::string_view in) {
  ParsedRequest r = ParseRequest(in, RequestLimits());
  if (r.kind != Kind::kCommand) return {"<kind " + std::to_string(static_cast<int>(r.kind)) + ">"};
  EXPECT_EQ(r.consumed, in.size()) << in;
  return std::vector<std::string>(r.args.begin(), r.args.end());
}

// What Redis 7.0.15's inline parser makes of each line (checked against a
// real redis-server with ECHO and GET): separators, both quotes, escapes,
// and quotes opened inside an argument.
TEST(ParseInline, SplitsAsRedisDoes) {
  EXPECT_THAT(InlineArgs("PING\r\n"), ElementsAre("PING"));
  EXPECT_THAT(InlineArgs("PING\n"), ElementsAre("PING"));
  EXPECT_THAT(InlineArgs("  ECHO   x  \r\n"), ElementsAre("ECHO", "x"));
  EXPECT_THAT(InlineArgs("ECHO\tx\r\n"), ElementsAre("ECHO", "x"));
  EXPECT_THAT(InlineArgs("SET k \"a\\x41\\n\\t\\\"b\"\r\n"), ElementsAre("SET", "k", "aA\n\t\"b"));
  EXPECT_THAT(InlineArgs("SET k 'it\\'s'\r\n"), ElementsAre("SET", "k", "it's"));
  EXPECT_THAT(InlineArgs("ECHO \"\\xzz\"\r\n"), ElementsAre("ECHO", "xzz"));
  EXPECT_THAT(InlineArgs("ECHO \"\\x4\"\r\n"), ElementsAre("ECHO", "x4"));
  EXPECT_THAT(InlineArgs("ECHO \"\\x4G\"\r\n"), ElementsAre("ECHO", "x4G"));
  EXPECT_THAT(InlineArgs("ECHO \"\\x00\"\r\n"), ElementsAre("ECHO", std::string(1, '\0')));
  EXPECT_THAT(InlineArgs("ECHO \"\\q\"\r\n"), ElementsAre("ECHO", "q"));
  EXPECT_THAT(InlineArgs("ECHO \"a\\\\b\"\r\n"), ElementsAre("ECHO", "a\\b"));
  EXPECT_THAT(InlineArgs("ECHO \"\\b\\a\\r\"\r\n"), ElementsAre("ECHO", "\b\a\r"));
  EXPECT_THAT(InlineArgs("ECHO 'a\\nb'\r\n"), ElementsAre("ECHO", "a\\nb"));
  EXPECT_THAT(InlineArgs("ECHO a\rb\n"), ElementsAre("ECHO", "a", "b"));
  EXPECT_THAT(InlineArgs("ECHO \"a\rb\"\n"), ElementsAre("ECHO", "a\rb"));
  EXPECT_THAT(InlineArgs("ECHO \"\" ''\r\n"), ElementsAre("ECHO", "", ""));
  EXPECT_THAT(InlineArgs("ECHO a\"b c\"\r\n"), ElementsAre("ECHO", "ab c"));
  EXPECT_THAT(InlineArgs("ECHO \"a b\"\t'c d'\r\n"), ElementsAre("ECHO", "a b", "c d"));
  EXPECT_THAT(InlineArgs("ECHO \vx\r\n"), ElementsAre("ECHO", "x"));
  EXPECT_THAT(InlineArgs("ECHO a\vb\r\n"), ElementsAre("ECHO", "a\vb"));
  EXPECT_THAT(InlineArgs("get k\xc3\xa9\r\n"), ElementsAre("get", "k\xc3\xa9"));
  // A line of exactly the bound is accepted.
  const std::string longest = "ECHO " + std::string(kMaxInlineBytes - 6, 'x') + "\r\n";
  EXPECT_THAT(InlineArgs(longest), ElementsAre("ECHO", std::string(kMaxInlineBytes - 6, 'x')));
}

TEST(ParseInline, EmptyLinesAreSkippedNotRun) {
  for (const char* in : {"\r\n", "\n", "   \r\n", "\t \v\n"}) {
    ParsedRequest r = ParseRequest(in, RequestLimits());
    EXPECT_EQ(r.kind, Kind::kEmptyLine) << in;
    EXPECT_EQ(r.consumed, std::strlen(in)) << in;
    EXPECT_TRUE(r.args.empty());
  }
}

// "SET key value" inline is an ordinary command: only the array form is
// streamed (kSetValue), since an inline value may be unescaped text.
TEST(ParseInline, SetIsAnOrdinaryCommand) {
  ParsedRequest r = ParseRequest("SET key \"v a l\"\r\n", RequestLimits());
  ASSERT_EQ(r.kind, Kind::kCommand) << r.error;
  EXPECT_THAT(r.args, ElementsAre("SET", "key", "v a l"));
}

// The views point into storage the request shares with its copies.
TEST(ParseInline, ArgumentsOutliveTheBufferAndSurviveCopies) {
  std::string buf = "ECHO \"hello world\" x\r\n";
  ParsedRequest r = ParseRequest(buf, RequestLimits());
  ParsedRequest copy = r;
  ParsedRequest moved = std::move(r);
  buf.assign(buf.size(), '#');
  EXPECT_THAT(copy.args, ElementsAre("ECHO", "hello world", "x"));
  EXPECT_THAT(moved.args, ElementsAre("ECHO", "hello world", "x"));
}

TEST(ParseInline, EveryPrefixOfALineNeedsMore) {
  const std::string in = "SET 'k 1' \"v\\x41\"\r\n";
  for (size_t n = 0; n < in.size(); ++n) {
    EXPECT_EQ(ParseRequest(in.substr(0, n), RequestLimits()).kind, Kind::kNeedMore) << n;
  }
  EXPECT_EQ(ParseRequest(in, RequestLimits()).kind, Kind::kCommand);
  // A line up to the bound keeps waiting for its line feed; past it, not.
  EXPECT_EQ(ParseRequest(std::string(kMaxInlineBytes, 'x'), RequestLimits()).kind, Kind::kNeedMore);
}

TEST(ParseInline, RequestLimitsApply) {
  RequestLimits limits;
  limits.max_args = 3;
  limits.max_bulk_bytes = 8;
  limits.max_buffered_bytes = 12;
  EXPECT_EQ(ParseRequest("SET k v\r\n", limits).kind, Kind::kCommand);
  ParsedRequest r = ParseRequest("MSET a 1 b 2\r\n", limits);
  EXPECT_EQ(r.kind, Kind::kError);
  EXPECT_EQ(r.error, "Protocol error: inline request of 5 arguments (limit 3)");
  r = ParseRequest("SET k 123456789\r\n", limits);
  EXPECT_EQ(r.error, "Protocol error: inline argument of 9 bytes (limit 8)");
  // Unescaped bytes count, not the line's: \x41 is one byte.
  EXPECT_EQ(ParseRequest("SET k \"\\x41\\x41\\x41\\x41\\x41\\x41\\x41\\x41\"\r\n", limits).kind,
            Kind::kCommand);
  r = ParseRequest("SET kkkkkkk vvvvvvv\r\n", limits);
  EXPECT_THAT(r.error, ::testing::StartsWith("Protocol error: request larger than 12 bytes"));
}

// Requests of both forms mixed in one stream, delivered in random pieces
// the way a socket may deliver them: parsing the growing buffer (as the
// port does) gives the same requests as parsing the whole stream.
TEST(ParseInline, PiecesGiveTheSameRequestsAsTheWhole) {
  const std::string stream =
      "PING\r\n\r\nSET k \"a b\"\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n  \n"
      "ECHO 'it\\'s' \"\\x41\"\r\nDEL k\n*1\r\n$4\r\nPING\r\nGET k\r\n";
  auto parse_all = [](absl::string_view buf, std::string* left) {
    std::vector<std::string> out;
    for (;;) {
      ParsedRequest r = ParseRequest(buf, RequestLimits());
      EXPECT_NE(r.kind, Kind::kError) << r.error;
      if (r.kind == Kind::kNeedMore || r.kind == Kind::kError) break;
      if (r.kind == Kind::kCommand) {
        std::string joined;
        for (absl::string_view a : r.args) absl::StrAppend(&joined, "[", a, "]");
        out.push_back(joined);
      }
      buf.remove_prefix(r.consumed);
    }
    *left = std::string(buf);
    return out;
  };
  std::string left;
  const std::vector<std::string> whole = parse_all(stream, &left);
  EXPECT_THAT(whole, ElementsAre("[PING]", "[SET][k][a b]", "[GET][k]", "[ECHO][it's][A]",
                                 "[DEL][k]", "[PING]", "[GET][k]"));
  EXPECT_TRUE(left.empty());
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::string buf;
    std::vector<std::string> got;
    for (size_t at = 0; at < stream.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 7, stream.size() - at);
      buf += stream.substr(at, n);
      at += n;
      std::vector<std::string> more = parse_all(buf, &buf);
      got.insert(got.end(), more.begin(), more.end());
    }
    ASSERT_EQ(got, whole) << "seed " << seed << " round " << round;
    ASSERT_TRUE(buf.empty());
  }
}

// --- RESP3 --------------------------------------------------------------------

TEST(Encode, Resp3ExactBytes) {
  std::string out;
  AppendResp3Null(&out);
  AppendMapHeader(&out, 2);
  AppendSetHeader(&out, 3);
  AppendPushHeader(&out, 1);
  AppendBool(&out, true);
  AppendBool(&out, false);
  AppendDouble(&out, 1.5);
  AppendBigNumber(&out, "-1234567890123456789012");
  AppendVerbatim(&out, "txt", "hi\r\nthere");
  EXPECT_EQ(out,
            "_\r\n%2\r\n~3\r\n>1\r\n#t\r\n#f\r\n,1.5\r\n(-1234567890123456789012\r\n"
            "=13\r\ntxt:hi\r\nthere\r\n");
}

TEST(Encode, DoublesAsRedisWritesThem) {
  EXPECT_EQ(FormatDouble(1.1), "1.1");
  EXPECT_EQ(FormatDouble(3.0), "3");
  EXPECT_EQ(FormatDouble(-1.5), "-1.5");
  EXPECT_EQ(FormatDouble(-0.0), "-0");
  EXPECT_EQ(FormatDouble(0.0), "0");
  EXPECT_EQ(FormatDouble(100), "100");
  EXPECT_EQ(FormatDouble(0.0001), "0.0001");
  EXPECT_EQ(FormatDouble(0.0025), "0.0025");
  EXPECT_EQ(FormatDouble(0.00001), "1e-05");
  EXPECT_EQ(FormatDouble(1e16), "10000000000000000");
  EXPECT_EQ(FormatDouble(1e17), "1e+17");
  EXPECT_EQ(FormatDouble(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(FormatDouble(1e300), "1e+300");
  EXPECT_EQ(FormatDouble(HUGE_VAL), "inf");
  EXPECT_EQ(FormatDouble(-HUGE_VAL), "-inf");
  EXPECT_EQ(FormatDouble(std::nan("")), "nan");
  EXPECT_EQ(FormatDouble(-std::nan("")), "nan");
  // Whatever the layout, the text reads back as the same double.
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 10000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (std::isnan(d) || std::isinf(d)) continue;
    double back;
    ASSERT_TRUE(absl::SimpleAtod(FormatDouble(d), &back)) << FormatDouble(d);
    ASSERT_EQ(back, d) << FormatDouble(d) << " seed " << seed;
  }
}

TEST(ParseReply, Resp3Types) {
  const std::string in =
      "%2\r\n+server\r\n$7\r\nkvstore\r\n+nil\r\n_\r\n"
      "~2\r\n#t\r\n#f\r\n"
      ">2\r\n,1.5\r\n,-inf\r\n"
      "(-123456789012345678901\r\n"
      "=8\r\ntxt:a\r\nb\r\n"
      "!8\r\nERR x\r\ny\r\n"
      "|1\r\n+ttl\r\n:3\r\n:42\r\n"
      ",nan\r\n";
  std::vector<Reply> got;
  absl::string_view rest(in);
  while (!rest.empty()) {
    auto r = ParseReply(rest, ReplyLimits());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->complete);
    got.push_back(r->reply);
    rest.remove_prefix(r->consumed);
  }
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0].type, Reply::Type::kMap);
  ASSERT_EQ(got[0].elements.size(), 4u);
  EXPECT_EQ(got[0].elements[1].str, "kvstore");
  EXPECT_EQ(got[0].elements[3].type, Reply::Type::kNull);
  EXPECT_EQ(got[1].type, Reply::Type::kSet);
  EXPECT_EQ(got[1].elements[0].type, Reply::Type::kBool);
  EXPECT_EQ(got[1].elements[0].integer, 1);
  EXPECT_EQ(got[1].elements[1].integer, 0);
  EXPECT_EQ(got[2].type, Reply::Type::kPush);
  EXPECT_EQ(got[2].elements[0].type, Reply::Type::kDouble);
  EXPECT_EQ(got[2].elements[0].number, 1.5);
  EXPECT_EQ(got[2].elements[1].number, -HUGE_VAL);
  EXPECT_EQ(got[3].type, Reply::Type::kBigNumber);
  EXPECT_EQ(got[3].str, "-123456789012345678901");
  EXPECT_EQ(got[4].type, Reply::Type::kVerbatim);
  EXPECT_EQ(got[4].str, "a\r\nb");
  EXPECT_EQ(got[5].type, Reply::Type::kError);
  EXPECT_EQ(got[5].str, "ERR x\r\ny");
  // The attribute is dropped: the reply is the integer after it.
  EXPECT_EQ(got[6].type, Reply::Type::kInteger);
  EXPECT_EQ(got[6].integer, 42);
  EXPECT_TRUE(std::isnan(got[7].number));
  // Every strict prefix is incomplete, never an error.
  for (size_t n = 0; n < in.size(); ++n) {
    auto r = ParseReply(absl::string_view(in).substr(0, n), ReplyLimits());
    ASSERT_TRUE(r.ok()) << n << ": " << r.status();
  }
}

TEST(ParseReply, MalformedResp3IsDataLoss) {
  for (const char* in : {"_x\r\n", "#x\r\n", "#\r\n", ",abc\r\n", ",\r\n", "(12a\r\n", "(\r\n",
                         "=3\r\nabc\r\n", "%-1\r\n", "~-1\r\n", "=-1\r\n", "!-1\r\n"}) {
    auto r = ParseReply(in, ReplyLimits());
    EXPECT_FALSE(r.ok()) << in;
    if (!r.ok()) EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << in;
  }
  ReplyLimits limits;
  limits.max_elements = 5;
  EXPECT_FALSE(ParseReply("%3\r\n", limits).ok());  // 6 elements
  EXPECT_TRUE(ParseReply("~5\r\n", limits).ok());
  limits.max_depth = 2;
  EXPECT_FALSE(ParseReply("|1\r\n+a\r\n|1\r\n+b\r\n|1\r\n+c\r\n:1\r\n", limits).ok());
}

}  // namespace
}  // namespace resp
}  // namespace kvstore
