// Copyright 2026 The kvstore Authors.

#include "common/protocol/resp.h"

#include <random>
#include <string>

#include "common/cluster/refusal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace resp {
namespace {

using Kind = ParsedRequest::Kind;
using ::testing::ElementsAre;
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
        Malformed{"InlineCommand", "PING\r\n", "expected '*', got 'P'"},
        Malformed{"Http", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "expected '*', got 'G'"},
        Malformed{"Binary", std::string("\x00\x01\x02", 3), "got '\\x00'"},
        Malformed{"BulkWithoutDollar", "*1\r\n:5\r\n", "expected '$'"},
        Malformed{"BadTerminator", "*1\r\n$4\r\nPINGxx", "not terminated"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

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

}  // namespace
}  // namespace resp
}  // namespace kvstore
