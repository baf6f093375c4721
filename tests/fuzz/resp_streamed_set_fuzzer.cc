// Copyright 2026 The kvstore Authors.
//
// Fuzzes StreamedSet (server/resp/streamed_set.h), the state machine that
// receives a SET's value straight into its pool entry, driven the way
// RespLoop drives it: the client's bytes arrive in chunks of sizes the input
// picks, each chunk is read either into the connection's buffer (and parsed
// with resp::ParseRequest) or, in the middle of a value with nothing
// buffered, by StreamedSet::ReceiveDirect from a real socket.
//
// Besides "no crash, no sanitizer report", it checks the outcome against a
// model that reads the whole stream in one piece, with the same rules:
//   * every SET that completed with its CRLF is in the store with exactly
//     its bytes (last write wins); a refused one (key or value over the
//     limit, over the in-flight budget) changes nothing, its value skipped;
//   * a value over max_value_bytes, a value not followed by CRLF, or a
//     framing error ends the stream there, as the loop closes;
//   * no key the stream named is in the store unless the model has it;
//   * the in-flight budget is all given back once the connection is gone,
//     and the buffered cursor never passes the buffer's end.
// So chunking (where reads split a header, a value or its CRLF) and the
// choice between buffered and direct receive cannot change what is stored.
// Input: byte 0 the in-flight budget (x8 bytes), bytes 1-4 seed the chunk
// sizes; the rest is the stream. Limits are small (keys 16, values 300
// bytes) so that every refusal path is within libFuzzer's -max_len.

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"
#include "common/protocol/resp.h"
#include "server/resp/connection.h"
#include "server/resp/limits.h"
#include "server/resp/resp_counters.h"
#include "server/resp/streamed_set.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"
#include "server/storage/memory_pool.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using resp::ParsedRequest;
using server::resp_internal::Budget;
using server::resp_internal::Connection;
using server::resp_internal::InputState;
using server::resp_internal::StreamedSet;
using Kind = ParsedRequest::Kind;

constexpr uint64_t kMaxKey = 16;
constexpr uint64_t kMaxValue = 300;

resp::RequestLimits ParseLimits() {
  // As RespLoop sets them for an authenticated connection.
  resp::RequestLimits l;
  l.max_bulk_bytes = std::max(kMaxKey, kMaxValue);
  l.max_args = 2 * 16 + 1;
  l.max_buffered_bytes = kMaxValue + (1 << 20);
  return l;
}

// What the store must hold after the stream: the model reads the whole
// stream at once with the same rules as the server.
struct Model {
  std::map<std::string, std::string> values;
  std::set<std::string> named;  // every key a SET named
};

Model Expect(absl::string_view stream, uint64_t budget) {
  Model m;
  const resp::RequestLimits limits = ParseLimits();
  Limits store_limits;
  store_limits.max_key_bytes = kMaxKey;
  store_limits.max_value_bytes = kMaxValue;
  while (!stream.empty()) {
    ParsedRequest p = resp::ParseRequest(stream, limits);
    if (p.kind == Kind::kNeedMore || p.kind == Kind::kError) break;
    if (p.kind == Kind::kCommand || p.kind == Kind::kEmptyLine) {
      stream.remove_prefix(p.consumed);
      continue;
    }
    const std::string key(p.args[1]);
    m.named.insert(key);
    const uint64_t len = p.value_len;
    const bool key_ok = store_limits.CheckKey(key).ok();
    if (key_ok && len > kMaxValue) break;  // answered and closed
    if (!key_ok && len > kMaxValue) break;
    stream.remove_prefix(p.consumed);
    if (stream.size() < len + 2) break;  // the value never completed
    const bool refused = !key_ok || (budget != 0 && key.size() + len > budget);
    if (!refused) {
      if (stream.substr(len, 2) != "\r\n") break;  // protocol error, closed
      m.values[key] = std::string(stream.substr(0, len));
    }
    // A refused value is skipped whatever follows it, CRLF or not.
    stream.remove_prefix(len + 2);
  }
  return m;
}

// The loop's per-connection steps, for one connection.
class Driver {
 public:
  Driver(server::KvStore* store, uint64_t budget, int fd)
      : registry_(),
        counters_(&registry_),
        budget_(budget),
        writer_(store->NewWriter()),
        sets_(store, writer_.get(), &counters_, &budget_),
        conn_(fd) {}

  // Reads what the socket has, as RespLoop::ReadSome does. False once the
  // connection would be closed.
  bool Read() {
    for (;;) {
      if (conn_.state == InputState::kValue && conn_.start == conn_.in.size() &&
          StreamedSet::Reserved(conn_)) {
        const ssize_t n = sets_.ReceiveDirect(&conn_);
        if (n > 0) continue;
        return true;  // EAGAIN: the chunk is used up
      }
      if (conn_.start == conn_.in.size()) {
        conn_.in.clear();
        conn_.start = 0;
      }
      char* room = conn_.in.Prepare(64 * 1024);
      const ssize_t n = recv(conn_.fd, room, 64 * 1024, MSG_DONTWAIT);
      if (n <= 0) return true;
      conn_.in.Commit(static_cast<size_t>(n));
      if (!Process()) return false;
    }
  }

  // Ends the connection as RespLoop::Close does; the budget must be whole.
  void Close() {
    sets_.Abandon(&conn_);
    KV_FUZZ_CHECK(budget_.used() == 0);
  }

 private:
  // RespLoop::Process for SET and everything else ignored. False once the
  // connection would be closed (protocol error, value over the limit).
  bool Process() {
    const resp::RequestLimits limits = ParseLimits();
    for (;;) {
      KV_FUZZ_CHECK(conn_.start <= conn_.in.size());
      if (conn_.close_after_flush) return false;
      if (conn_.state != InputState::kCommands) {
        switch (sets_.ConsumeBuffered(&conn_)) {
          case StreamedSet::Progress::kNeedMore:
            return true;
          case StreamedSet::Progress::kHeldBack:
            // The pool here is far larger than any stream can fill.
            KV_FUZZ_CHECK(false);
            return false;
          case StreamedSet::Progress::kBadTerminator:
            return false;
          case StreamedSet::Progress::kDone:
            continue;
        }
      }
      const absl::string_view buf = conn_.in.view(conn_.start);
      if (buf.empty()) return true;
      ParsedRequest req = resp::ParseRequest(buf, limits);
      switch (req.kind) {
        case Kind::kNeedMore:
          return true;
        case Kind::kError:
          return false;
        case Kind::kSetValue:
          conn_.start += req.consumed;
          sets_.Begin(&conn_, req.args[1], req.value_len);
          continue;
        case Kind::kCommand:
        case Kind::kEmptyLine:
          conn_.start += req.consumed;
          continue;
      }
    }
  }

  metrics::Registry registry_;
  server::resp_internal::Counters counters_;
  Budget budget_;
  std::unique_ptr<server::KvStore::Writer> writer_;
  StreamedSet sets_;
  Connection conn_;
};

// A small xorshift for the chunk sizes: the same input, the same chunks.
uint32_t Next(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvstore;  // NOLINT: a fuzzer entry point, outside the namespace
  fuzz::FuzzInput in(data, size);
  const uint64_t budget = 8 * uint64_t{in.Int<uint8_t>()};  // 0: no bound
  uint32_t seed = in.Int<uint32_t>() | 1;
  const absl::string_view stream = in.Rest();

  server::MemoryPoolOptions po;
  po.data_bytes = 4 << 20;
  po.index_bytes = 64 << 10;
  po.prefault = false;
  auto pool = server::MemoryPool::Create(po);
  KV_FUZZ_CHECK(pool.ok());
  server::FakeClock clock;
  metrics::Registry store_registry;
  server::KvStoreOptions so;
  so.segment_bytes = 64 << 10;
  so.cleaner_interval = absl::ZeroDuration();
  so.grace_period = absl::Milliseconds(2);
  so.limits.max_key_bytes = kMaxKey;
  so.limits.max_value_bytes = kMaxValue;
  so.clock = &clock;
  so.registry = &store_registry;
  auto store = server::KvStore::Create(pool->get(), so);
  KV_FUZZ_CHECK(store.ok());

  int fds[2];
  KV_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
  {
    Driver driver(store->get(), budget, fds[0]);
    absl::string_view rest = stream;
    bool open = true;
    while (open && !rest.empty()) {
      const size_t n = std::min<size_t>(rest.size(), 1 + Next(&seed) % 97);
      KV_FUZZ_CHECK(send(fds[1], rest.data(), n, MSG_NOSIGNAL) == static_cast<ssize_t>(n));
      rest.remove_prefix(n);
      open = driver.Read();
    }
    driver.Close();
  }
  close(fds[0]);
  close(fds[1]);

  const Model model = Expect(stream, budget);
  for (const std::string& key : model.named) {
    auto got = (*store)->Get(key);
    auto want = model.values.find(key);
    if (want == model.values.end()) {
      KV_FUZZ_CHECK(!got.ok());
    } else {
      KV_FUZZ_CHECK(got.ok());
      KV_FUZZ_CHECK(got->value() == want->second);
    }
  }
  return 0;
}
