// What /proc says about a process's sockets (fault_stray_client finds a
// running job's listeners with these).
#pragma once

#include <map>
#include <set>

// The inodes of the sockets `pid` holds (/proc/<pid>/fd).
std::set<unsigned long> socketInodes(int pid);
// LISTEN sockets on 127.0.0.1 or 0.0.0.0 (/proc/net/tcp): inode -> port.
std::map<unsigned long, int> loopbackListeners();
