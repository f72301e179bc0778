// hetccl-info: prints the settings registry (every HETCCL_* variable, its
// value in this environment, default, allowed values and meaning), what this
// build can load, and, under a launcher (torchrun, mpirun, srun) or with
// --topology, the communicator's topology as every rank sees it. It uses the
// public API only.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hetccl/hetccl.h"

namespace {

template <class F>
void forEachSetting(F&& f) {
  int n = 0;
  hetcclGetSettingCount(&n);
  for (int i = 0; i < n; ++i) {
    hetcclSetting_t s{};
    s.size = sizeof(s);
    if (hetcclGetSetting(i, &s) == hetcclSuccess) f(s);
  }
}

void printRegistry() {
  printf("# settings (environment variables)\n");
  forEachSetting([](const hetcclSetting_t& v) {
    printf("%-22s = %-10s [%s, %s; default '%s'%s%s]\n    %s\n    allowed: %s\n", v.name, *v.value ? v.value : "''",
           v.type, v.fromEnvironment ? "env" : "default", v.defaultValue, v.alsoRead ? "; also read: " : "",
           v.alsoRead ? v.alsoRead : "", v.help, v.allowed);
  });
}

// docs/settings.md's table, from the registry itself (a test checks that
// the page carries exactly this).
void printMarkdown() {
  printf("| variable | default | allowed | meaning |\n|---|---|---|---|\n");
  forEachSetting([](const hetcclSetting_t& v) {
    std::string help = v.help;
    for (size_t p = 0; (p = help.find('|', p)) != std::string::npos; p += 2) help.replace(p, 1, "\\|");
    std::string dflt = *v.defaultValue ? std::string("`") + v.defaultValue + "`" : "(unset)";
    std::string also = v.alsoRead ? std::string(" (else `") + v.alsoRead + "`)" : "";
    printf("| `%s`%s | %s | %s | %s |\n", v.name, also.c_str(), dflt.c_str(), v.allowed, help.c_str());
  });
}

void printBuild() {
  int version = 0;
  hetcclGetVersion(&version);
  hetcclBuildInfo_t b{};
  b.size = sizeof(b);
  hetcclGetBuildInfo(&b);
  printf("# hetccl %d.%d.%d\n", version / 10000, (version / 100) % 100, version % 100);
  printf("# device kinds: %s\n# transports: %s\n# group backends: %s (vendor libraries load at run time)\n",
         b.deviceKinds, b.transports, b.backends);
}

int printTopology() {
  hetcclComm_t comm = nullptr;
  if (hetcclCommInitFromEnv(&comm, nullptr) != hetcclSuccess) {
    fprintf(stderr, "hetccl-info: %s\n", hetcclGetLastError(nullptr));
    return 1;
  }
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  hetcclCommGetInfo(comm, &info);
  // Every rank prints its own line, in rank order through a barrier per rank.
  int one = 1, sink = 0;
  for (int r = 0; r < info.nranks; ++r) {
    if (r == info.rank) {
      if (r == 0) {
        const char* plus = strchr(info.transport, '+');
        if (plus)  // a transport per link class: "<intra>+<inter>"
          printf("# topology: %d ranks in %d groups, transport %s (peers on one host: %.*s; on other hosts: %s)\n",
                 info.nranks, info.ngroups, info.transport, static_cast<int>(plus - info.transport), info.transport,
                 plus + 1);
        else
          printf("# topology: %d ranks in %d groups, transport %s\n", info.nranks, info.ngroups, info.transport);
        for (int g = 0; g < info.ngroups; ++g)
          printf("#   group %d '%s': %d ranks, backend %s\n", g, info.groupName[g], info.groupSize[g],
                 info.groupBackend[g]);
      }
      printf(
          "rank %d: device %s, group '%s' rank %d, border peers %d, border path %s, site '%s', encryption %s "
          "(%d links encrypted, %d plaintext), border cut %s (share %.3f of its group's shards",
          info.rank, info.deviceKind, info.groupName[info.myGroup], info.myGroupRank, info.borderPeers, info.borderPath,
          info.site, info.encrypt, info.encryptedPeers, info.plainPeers, info.borderCut, info.borderShare);
      if (info.borderGbps > 0) printf(", link %.3g Gb/s", info.borderGbps);
      printf(")\n");
      fflush(stdout);
    }
    hetcclAllReduce(&one, &sink, 1, hetcclInt32, hetcclSum, comm, nullptr);
  }
  hetcclCommDestroy(comm);
  return 0;
}

bool underLauncher() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (getenv(v)) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bool topo = underLauncher();
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--topology")) {
      topo = true;
    } else if (!strcmp(argv[i], "--settings")) {
      topo = false;
    } else if (!strcmp(argv[i], "--markdown")) {
      printMarkdown();
      return 0;
    } else {
      printf(
          "usage: hetccl-info [--settings | --topology | --markdown]\n"
          "  prints the HETCCL_* settings and what this build can load; under a launcher\n"
          "  (torchrun, mpirun, srun) or with --topology it also joins the job and prints its topology;\n"
          "  --markdown prints the settings as docs/settings.md's table\n");
      return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  const char* rank = getenv("RANK") ? getenv("RANK") : getenv("OMPI_COMM_WORLD_RANK");
  if (!rank || !strcmp(rank, "0")) {
    printBuild();
    printRegistry();
  }
  return topo ? printTopology() : 0;
}
