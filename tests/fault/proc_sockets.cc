#include "proc_sockets.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <string>

std::set<unsigned long> socketInodes(int pid) {
  std::set<unsigned long> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char link[128];
    std::string p = dir + "/" + e->d_name;
    ssize_t n = readlink(p.c_str(), link, sizeof(link) - 1);
    if (n <= 0) continue;
    link[n] = 0;
    unsigned long ino;
    if (sscanf(link, "socket:[%lu]", &ino) == 1) out.insert(ino);
  }
  closedir(d);
  return out;
}

std::map<unsigned long, int> loopbackListeners() {
  std::map<unsigned long, int> out;
  FILE* f = fopen("/proc/net/tcp", "r");
  if (!f) return out;
  char line[512];
  fgets(line, sizeof(line), f);  // header
  while (fgets(line, sizeof(line), f)) {
    unsigned addr, port, st;
    unsigned long ino;
    char rem[64];
    int fields = sscanf(line, " %*d: %8X:%4X %63s %2X %*s %*s %*s %*s %*s %lu", &addr, &port, rem, &st, &ino);
    if (fields != 5 || st != 0x0A) continue;
    if (addr != 0x0100007F && addr != 0) continue;  // little-endian 127.0.0.1, or any
    out[ino] = static_cast<int>(port);
  }
  fclose(f);
  return out;
}
