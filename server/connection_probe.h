// Noticing that the client of a non-streaming request went away while its
// completion is computed. cpp-httplib (0.11) hands a handler no socket and
// writes nothing before the handler returns, so the handler finds its
// connection's socket by the addresses httplib reports (a socket of this
// process whose local and peer endpoints are the request's) and asks the
// kernel whether the peer has closed it. A streaming request notices on its
// next write instead (server/completion.cpp).
#pragma once

#include <string>

namespace llmc::server {

// The socket of the connection from remoteAddr:remotePort to localPort, or
// -1 when none is found (then the request is simply not watched).
int findConnectionSocket(const std::string &remoteAddr, int remotePort, int localPort);

// Whether the peer has closed (or reset) the connection on `socket`: an
// orderly FIN (a read would return 0), a reset or a hang-up. Bytes waiting
// to be read (a pipelined next request) do not count. Never blocks.
bool peerHasClosed(int socket);

} // namespace llmc::server
