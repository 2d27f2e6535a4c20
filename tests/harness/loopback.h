// Plain TCP sockets on 127.0.0.1 for tests that need a connection without a protocol on it (idle
// or slow clients, a server end to shut down).
#pragma once

namespace pkv::testing {

// A blocking socket connected to 127.0.0.1:port; -1 when the connect fails.
int ConnectLoopback(int port);

// The local (client-side) port of a connected socket; -1 on error.
int LocalPort(int fd);

}  // namespace pkv::testing
