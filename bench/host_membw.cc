// Host memory bandwidth with T threads: each thread copies its share of a
// SIZE-byte buffer into another one, REPS times; the best rep is reported as
// bytes copied per second (a copy moves twice that through memory). This is
// the ceiling for any host-side step of a collective on this machine.
//
//   hetccl-membw [SIZE_MIB=256] [THREADS=1,2,4,8,16] [REPS=5]
// Prints one line per thread count:  membw threads=T copy_GBps=X
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  std::string list = argc > 2 ? argv[2] : "1,2,4,8,16";
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  if (bytes == 0 || reps <= 0) {
    std::fprintf(stderr, "usage: hetccl-membw [SIZE_MIB>0] [THREADS,...] [REPS>0]\n");
    return 2;
  }
  std::vector<char> a(bytes, 1), b(bytes, 2);  // touched: no first-fault cost in the timing
  for (size_t at = 0; at < list.size();) {
    size_t comma = list.find(',', at);
    int t = std::atoi(list.substr(at, comma - at).c_str());
    at = comma == std::string::npos ? list.size() : comma + 1;
    if (t <= 0) continue;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> th;
      for (int i = 0; i < t; ++i)
        th.emplace_back([&, i] {
          size_t lo = bytes * i / t, hi = bytes * (i + 1) / t;
          std::memcpy(b.data() + lo, a.data() + lo, hi - lo);
        });
      for (auto& x : th) x.join();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("membw threads=%d copy_GBps=%.1f\n", t, static_cast<double>(bytes) / best / 1e9);
  }
  return b[bytes / 2] == 1 ? 0 : 1;
}
