// A hook on connect(2) for fault tests: the executable that links
// connect_hook.cc interposes connect(), which libhetccl.so calls for every
// TCP connection it makes (rendezvous root, bootstrap ring, TCP transport),
// so a rank can act at an exact point of its bootstrap: right after its
// N-th successful IPv4/IPv6 connect. Pass-through until armed; arm it in a
// rank (child process) only.
#pragma once

#include <functional>

namespace hfault {

// Calls `hook` (in the connecting thread, before connect() returns to the
// library) right after the n-th successful TCP connect from now on.
void armAfterConnect(int n, std::function<void()> hook);

}  // namespace hfault
