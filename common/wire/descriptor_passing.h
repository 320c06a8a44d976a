// File descriptors over a unix socket (SCM_RIGHTS): how a rank hands the coordinator its
// shared memory, and the coordinator hands ranks their communicators' peer mailboxes.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <deque>

namespace fakegpu {

// Makes fd travel with msg as SCM_RIGHTS ancillary data; control holds CMSG_SPACE(sizeof(int)).
void attach_descriptor(msghdr& msg, char* control, int fd);

// Sends one byte carrying fd, with extra sendmsg flags (MSG_DONTWAIT, say). Returns false,
// errno set, when the socket did not take it.
bool send_descriptor(int socket, int fd, int flags = 0);

// One recvmsg of at most len bytes (MSG_DONTWAIT); the descriptors that came with them are
// appended to *fds, marked close-on-exec. Returns what recvmsg returned.
ssize_t receive_with_descriptors(int socket, void* buf, size_t len, std::deque<int>* fds);

}  // namespace fakegpu
