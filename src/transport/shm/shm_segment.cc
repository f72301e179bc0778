#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "transport/progress.h"

namespace hetccl {
namespace {

size_t ringBytesOf(uint32_t slots, size_t slotBytes) {
  return kShmRingHeader + static_cast<size_t>(slots) * (kShmSlotHeader + slotBytes);
}

std::string mib(size_t b) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return buf;
}

}  // namespace

ShmGeometry shmGeometry(int n, size_t buffBytes) {
  const size_t maxHost = settings::kShmMax.get();
  const size_t rings = static_cast<size_t>(n) * static_cast<size_t>(std::max(n - 1, 1));
  ShmGeometry g;
  g.slotBytes = settings::kShmSlotBytes.get();
  g.slots = static_cast<uint32_t>(std::clamp<size_t>(buffBytes / g.slotBytes, 2, 1024));
  auto total = [&] { return static_cast<size_t>(n) * kShmInboxHeader + rings * ringBytesOf(g.slots, g.slotBytes); };
  const std::string formula = std::to_string(n) + " ranks on this host need " + std::to_string(n) + " x " +
                              std::to_string(std::max(n - 1, 1)) + " rings";
  if (total() > maxHost) {
    if (settings::kBuffSize.isSet())
      throwError(hetcclInvalidArgument, "shm: " + formula + " of HETCCL_BUFFSIZE (" + mib(buffBytes) +
                                            " each: " + mib(total()) + ") but HETCCL_SHM_MAX is " + mib(maxHost) +
                                            "; lower HETCCL_BUFFSIZE or raise HETCCL_SHM_MAX");
    // Fewer slots, then (HETCCL_SHM_SLOT_BYTES unset) smaller ones.
    const size_t perRing = (maxHost - static_cast<size_t>(n) * kShmInboxHeader) / rings;
    if (perRing > kShmRingHeader)
      g.slots =
          static_cast<uint32_t>(std::min<size_t>(g.slots, (perRing - kShmRingHeader) / (kShmSlotHeader + g.slotBytes)));
    if (g.slots < 2 && !settings::kShmSlotBytes.isSet() && perRing > kShmRingHeader + 2 * kShmSlotHeader) {
      g.slots = 2;
      g.slotBytes = std::max<size_t>(4096, ((perRing - kShmRingHeader) / 2 - kShmSlotHeader) & ~size_t{4095});
    }
    if (g.slots < 2 || total() > maxHost)
      throwError(hetcclInvalidArgument, "shm: " + formula + " of at least 2 slots of " +
                                            std::to_string(std::max<size_t>(g.slotBytes, 4096)) + " bytes (" +
                                            mib(static_cast<size_t>(n) * kShmInboxHeader +
                                                rings * ringBytesOf(2, std::max<size_t>(g.slotBytes, 4096))) +
                                            ") but HETCCL_SHM_MAX is " + mib(maxHost) +
                                            "; raise HETCCL_SHM_MAX, or use HETCCL_TRANSPORT=tcp");
    LOG_INFO(kTransport, "shm: rings of %u slots of %zu bytes, to keep %d ranks' rings within HETCCL_SHM_MAX (%s)",
             g.slots, g.slotBytes, n, mib(maxHost).c_str());
  }
  g.ringBytes = ringBytesOf(g.slots, g.slotBytes);
  g.segBytes = kShmInboxHeader + static_cast<size_t>(std::max(n - 1, 1)) * g.ringBytes;
  g.hostBytes = total();
  return g;
}

std::string shmSegmentName(int creatorPid, uint64_t jobId, int rank) {
  char buf[80];
  snprintf(buf, sizeof(buf), "/hetccl-%d-%016llx-%d", creatorPid, static_cast<unsigned long long>(jobId), rank);
  return buf;
}

int removeStaleShmSegments() {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    int pid = 0;
    if (sscanf(e->d_name, "hetccl-%d-", &pid) != 1 || pid <= 0 || processAlive(pid)) continue;
    struct stat st;
    std::string path = std::string("/dev/shm/") + e->d_name;
    if (stat(path.c_str(), &st) != 0 || st.st_uid != me) continue;
    if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  closedir(d);
  if (removed) LOG_INFO(kTransport, "shm: removed %d segments left by killed jobs", removed);
  return removed;
}

int createShmSegment(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throwSystemError("shm_open " + name, errno);
  // posix_fallocate reserves the pages (tmpfs): no SIGBUS on a full /dev/shm later.
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    struct statvfs vfs {};
    std::string room = statvfs("/dev/shm", &vfs) == 0
                           ? " (" + mib(static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize) + " free)"
                           : std::string();
    throwSystemError("shm: reserving " + mib(bytes) + " for " + name + " in /dev/shm" + room +
                         "; free /dev/shm, lower HETCCL_BUFFSIZE or HETCCL_SHM_MAX, or use HETCCL_TRANSPORT=tcp",
                     rc);
  }
  return fd;
}

size_t pageRound(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

uint8_t* mapShmSegment(int fd, size_t bytes, const std::string& what) {
  void* p =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
  const int err = errno;
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED) throwSystemError("mmap " + what, err);
  return static_cast<uint8_t*>(p);
}

}  // namespace hetccl
