#include "server/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace llmc::server {
namespace {

// The address and port of a socket endpoint as httplib prints them.
bool endpointOf(const sockaddr_storage &address, std::string &ip, int &port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto &v4 = reinterpret_cast<const sockaddr_in &>(address);
    if (!inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text))
      return false;
    port = ntohs(v4.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto &v6 = reinterpret_cast<const sockaddr_in6 &>(address);
    if (!inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text))
      return false;
    port = ntohs(v6.sin6_port);
  } else {
    return false;
  }
  ip = text;
  return true;
}

bool isConnection(int fd, const std::string &remoteAddr, int remotePort, int localPort) {
  sockaddr_storage local{}, peer{};
  socklen_t localSize = sizeof local, peerSize = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&local), &localSize) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peerSize) != 0)
    return false; // not a socket, or not connected
  std::string ip;
  int port = -1;
  if (!endpointOf(local, ip, port) || port != localPort)
    return false;
  return endpointOf(peer, ip, port) && port == remotePort && ip == remoteAddr;
}

} // namespace

int findConnectionSocket(const std::string &remoteAddr, int remotePort, int localPort) {
  if (remotePort <= 0 || localPort <= 0)
    return -1;
  DIR *fds = opendir("/proc/self/fd");
  if (fds == nullptr)
    return -1;
  int found = -1;
  while (dirent *entry = readdir(fds)) {
    char *end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds))
      continue;
    if (isConnection(static_cast<int>(fd), remoteAddr, remotePort, localPort)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
  return found;
}

bool peerHasClosed(int socket) {
  pollfd probe{socket, POLLIN | POLLRDHUP, 0};
  if (poll(&probe, 1, 0) <= 0)
    return false;
  if (probe.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
    return true;
  if (probe.revents & POLLIN) {
    char byte;
    return recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

} // namespace llmc::server
