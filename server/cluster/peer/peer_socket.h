// Copyright 2026 The kvstore Authors.
//
// The peer socket: a plain TCP connection between two kvservers of a
// cluster that carries length-prefixed protobuf frames (docs/protocol.md,
// "The peer socket"). Each frame is a 4-byte little-endian length and then
// that many bytes of one serialized message. The first frame each way is
// the handshake (PeerSocketHello, PeerSocketWelcome in
// proto/kv_cluster.proto); what follows depends on the hello's purpose.
//
// Why not gRPC for this: the replication stream is the one peer
// conversation on every replicated write's path. Over gRPC each message
// costs HTTP/2 framing and hand-offs between gRPC's threads on both nodes,
// which made a replicated write cost several times an unreplicated one
// (docs/performance.md); on a socket a message costs a send() and the
// reader's wake-up. It is used only where the peers' gRPC is plaintext too:
// a TLS cluster keeps every peer byte on TLS (docs/security.md).
//
// This file: the framing (FrameReader, AppendFrame) and the blocking
// helpers both ends use for the handshake (Connect, SendAll, ReadFrame).
//
// Thread safety: FrameReader is not thread-safe (one reader per socket);
// the free functions are.

#ifndef KVSTORE_SERVER_CLUSTER_PEER_PEER_SOCKET_H_
#define KVSTORE_SERVER_CLUSTER_PEER_PEER_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace kvstore {
namespace server {

// The largest frame either end accepts: a batch of writes up to the value
// limit each is far smaller; a length above it is a broken or hostile
// stream, not a big message.
inline constexpr uint32_t kMaxPeerFrameBytes = 1u << 30;

// "replicate": the hello purpose of a replication stream.
inline constexpr absl::string_view kReplicatePurpose = "replicate";

// TCP_NODELAY, and keepalive probes that find a peer gone silent (a
// partition that drops packets, a host that died) within about 30 s: a
// stream's reader blocks in recv() for as long as the other end is idle,
// and would otherwise wait forever on a connection whose FIN was lost.
void TunePeerSocket(int fd);

// Appends `msg` as one frame to `out`.
void AppendFrame(const google::protobuf::MessageLite& msg, std::string* out);

// Frames out of a byte stream: Receive() what the socket has, then take
// each complete frame with Next().
class FrameReader {
 public:
  FrameReader() = default;
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // One recv() from `fd` into the buffer (growing it to the frame being
  // received), with recv()'s `flags` (MSG_DONTWAIT: never block). Returns
  // recv()'s result: bytes read, 0 at EOF, -1 with errno.
  ssize_t Receive(int fd, int flags = 0);
  // The payload of the next complete frame, valid until the next call of
  // either method; nullopt when no complete frame is buffered.
  // kDataLoss for a length above kMaxPeerFrameBytes (close the socket).
  absl::StatusOr<std::optional<absl::string_view>> Next();
  // Bytes buffered and not yet taken by Next().
  size_t buffered() const { return end_ - start_; }

 private:
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t start_ = 0;  // first byte not taken
  size_t end_ = 0;    // one past the last byte received
  size_t want_ = 0;   // bytes the frame at start_ needs in all (0: unknown)
};

// A connected, non-blocking TCP socket to `host_port` ("host:port", IPv4
// or a name), tuned by TunePeerSocket(). Gives up at `deadline`, or at once when
// `cancel_fd` (an eventfd, -1: none) becomes readable. kUnavailable naming
// the address otherwise; kInvalidArgument for an address without a port.
absl::StatusOr<int> ConnectTo(const std::string& host_port, absl::Time deadline,
                              int cancel_fd = -1);

// Writes all of `data` to the socket `fd`, waiting for room up to
// `deadline` (or until `cancel_fd` is readable: kCancelled). kUnavailable
// when the peer is gone, kDeadlineExceeded.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline, int cancel_fd = -1);

// Reads the next frame from the socket `fd` into `msg`, waiting up to
// `deadline` (or until `cancel_fd` is readable: kCancelled). kUnavailable
// at EOF or a socket error, kDeadlineExceeded, kDataLoss for a frame that
// does not parse or is too long.
absl::Status ReadFrame(int fd, FrameReader& reader, google::protobuf::MessageLite* msg,
                       absl::Time deadline, int cancel_fd = -1);
// The same, leaving the frame's payload unparsed in `reader`'s buffer,
// valid until the reader's next use (for a reader that parses in place).
// The same errors but the parse's.
absl::StatusOr<absl::string_view> NextFrame(int fd, FrameReader& reader, absl::Time deadline,
                                            int cancel_fd = -1);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_PEER_PEER_SOCKET_H_
