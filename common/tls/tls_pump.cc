// Copyright 2026 The kvstore Authors.

#include "common/tls/tls_pump.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/tls/ssl_context.h"

namespace kvstore {
namespace tls {
namespace {

constexpr size_t kBuffer = 64 << 10;

// One direction's bytes in flight: [head, tail) of data.
struct Buffer {
  char data[kBuffer];
  size_t head = 0;
  size_t tail = 0;
  size_t size() const { return tail - head; }
  bool empty() const { return head == tail; }
  // Room at the end, compacting first when the front is free.
  size_t room() {
    if (head > 0 && tail == kBuffer) {
      std::memmove(data, data + head, size());
      tail -= head;
      head = 0;
    }
    if (head == tail) head = tail = 0;
    return kBuffer - tail;
  }
  void consume(size_t n) {
    head += n;
    if (head == tail) head = tail = 0;
  }
};

// POLLIN/POLLOUT for an SSL call that returned `ret`; 0 when it neither
// wants to read nor to write (closed or failed).
short WantOf(SSL* ssl, int ret) {
  switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    default:
      return 0;
  }
}

}  // namespace

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

absl::Status Handshake(SSL* ssl, int fd, absl::Time deadline) {
  for (;;) {
    ERR_clear_error();
    const int ret = SSL_do_handshake(ssl);
    if (ret == 1) return absl::OkStatus();
    const short want = WantOf(ssl, ret);
    if (want == 0) {
      std::string why = TakeSslErrors();
      if (why.empty()) why = errno != 0 ? std::strerror(errno) : "the peer closed the connection";
      return absl::UnavailableError(absl::StrCat("TLS handshake failed: ", why));
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return absl::DeadlineExceededError("TLS handshake timed out");
    pollfd p{fd, want, 0};
    poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
  }
}

absl::Status Pump(SSL* ssl, int tls_fd, int plain_fd) {
  Buffer up;    // plain -> TLS
  Buffer down;  // TLS -> plain
  bool plain_eof = false;
  bool tls_eof = false;
  short tls_read_want = POLLIN;
  short tls_write_want = 0;
  for (;;) {
    bool progress = false;
    // TLS -> buffer.
    if (!tls_eof && down.room() > 0) {
      ERR_clear_error();
      const int n = SSL_read(ssl, down.data + down.tail, static_cast<int>(down.room()));
      if (n > 0) {
        down.tail += static_cast<size_t>(n);
        progress = true;
        tls_read_want = POLLIN;
      } else {
        tls_read_want = WantOf(ssl, n);
        if (tls_read_want == 0) {
          // close_notify, a bare EOF or an error: nothing more comes.
          tls_eof = true;
          progress = true;
        }
      }
    }
    // Buffer -> plain.
    if (!down.empty()) {
      const ssize_t n = send(plain_fd, down.data + down.head, down.size(), MSG_NOSIGNAL);
      if (n > 0) {
        down.consume(static_cast<size_t>(n));
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("plaintext side: ", std::strerror(errno)));
      }
    }
    // Plain -> buffer.
    if (!plain_eof && up.room() > 0) {
      const ssize_t n = recv(plain_fd, up.data + up.tail, up.room(), 0);
      if (n > 0) {
        up.tail += static_cast<size_t>(n);
        progress = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        plain_eof = true;
        progress = true;
      }
    }
    // Buffer -> TLS.
    if (!up.empty()) {
      ERR_clear_error();
      const int n = SSL_write(ssl, up.data + up.head, static_cast<int>(up.size()));
      if (n > 0) {
        up.consume(static_cast<size_t>(n));
        progress = true;
        tls_write_want = 0;
      } else {
        tls_write_want = WantOf(ssl, n);
        if (tls_write_want == 0) {
          return absl::UnavailableError(absl::StrCat("TLS write failed: ", TakeSslErrors()));
        }
      }
    }
    // Done once a side closed and what it sent is delivered.
    if (tls_eof && down.empty()) return absl::OkStatus();
    if (plain_eof && up.empty()) {
      SSL_shutdown(ssl);  // close_notify, best effort
      return absl::OkStatus();
    }
    if (progress) continue;
    pollfd p[2] = {{tls_fd, 0, 0}, {plain_fd, 0, 0}};
    if (!tls_eof && down.room() > 0) p[0].events |= tls_read_want;
    if (!up.empty()) p[0].events |= tls_write_want;
    if (!plain_eof && up.room() > 0) p[1].events |= POLLIN;
    if (!down.empty()) p[1].events |= POLLOUT;
    // POLLHUP/POLLERR wake it whatever was asked for.
    if (poll(p, 2, -1) < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
  }
}

}  // namespace tls
}  // namespace kvstore
