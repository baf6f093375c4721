// Copyright 2026 The kvstore Authors.
//
// The DataPath defaults: zero copy done with copies, as over TCP.

#include "client/internal/data_path.h"

#include <map>
#include <string>

#include "client/internal/buffer_access.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

// A DataPath over a map, implementing only what the defaults build on.
class MapPath final : public DataPath {
 public:
  // Get and Put are what GetInto/PutFrom's defaults are built on.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time) override {
    auto it = data_.find(std::string(key));
    if (it == data_.end()) return absl::NotFoundError("absent");
    return it->second;
  }
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time) override {
    data_[std::string(key)] = std::string(value);
    return absl::OkStatus();
  }
  // The rest are stubs: the defaults under test never call them.
  absl::Status Delete(absl::string_view, absl::Time) override { return absl::OkStatus(); }
  absl::StatusOr<bool> Exists(absl::string_view, absl::Time) override { return false; }
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(absl::Span<const std::string>,
                                                                    absl::Time) override {
    return std::vector<absl::StatusOr<std::string>>();
  }
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time) override {
    return std::vector<absl::Status>(pairs.size());
  }
  // Not a transport KvClient knows; the defaults do not look at it.
  absl::string_view name() const override { return "map"; }

 private:
  std::map<std::string, std::string> data_;
};

// Without a device, Register() only describes the memory: lkey 0 tells the
// RDMA path to copy. A default path is never broken (nothing to rebuild).
TEST(DataPathDefaults, RegisterDescribesPlainMemory) {
  MapPath p;
  char mem[16];
  auto b = p.Register(mem, sizeof(mem));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), mem);
  EXPECT_EQ(b->size(), sizeof(mem));
  EXPECT_EQ(KvClientInternal::lkey(*b), 0u);
  EXPECT_EQ(p.Register(nullptr, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(p.broken());
}

// GetInto/PutFrom by copy: the range checks come before any I/O, and a
// value larger than the caller's capacity is kOutOfRange, not truncated.
TEST(DataPathDefaults, GetIntoAndPutFromCopy) {
  MapPath p;
  const absl::Time deadline = absl::InfiniteFuture();
  char mem[16] = "..hello.......";
  // "hello" sits at offset 2 of the source buffer.
  RegisteredBuffer b = *p.Register(mem, sizeof(mem));
  ASSERT_TRUE(p.PutFrom("k", b, 2, 5, deadline).ok());
  EXPECT_EQ(*p.Get("k", deadline), "hello");
  // Read back at an offset, so the copy must honour it.
  char out[16] = {};
  RegisteredBuffer o = *p.Register(out, sizeof(out));
  auto n = p.GetInto("k", o, 3, 8, deadline);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(std::string(out + 3, 5), "hello");
  // Too small, out of range (read and write side), absent key.
  EXPECT_EQ(p.GetInto("k", o, 0, 4, deadline).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(p.GetInto("k", o, 10, 8, deadline).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.PutFrom("k", b, 17, 0, deadline).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.GetInto("absent", o, 0, 8, deadline).status().code(), absl::StatusCode::kNotFound);
}

// The mark is a payload: the code is kept, so callers still see kUnavailable.
TEST(DataPathDefaults, NotSentMarksTheStatus) {
  absl::Status s = NotSent(absl::UnavailableError("down"));
  EXPECT_TRUE(s.GetPayload(kNotSentPayload).has_value());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
