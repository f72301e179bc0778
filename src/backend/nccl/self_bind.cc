// GOT entries of a loaded library pointed back at its own API (self_bind.h).
#include "backend/nccl/self_bind.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace hetccl::nccl {
namespace {

#if defined(__x86_64__)
constexpr bool kSupported = true;
// JUMP_SLOT and GLOB_DAT hold S; R_X86_64_64 holds S + A.
bool handledType(unsigned t, bool* addend) {
  *addend = t == R_X86_64_64;
  return t == R_X86_64_JUMP_SLOT || t == R_X86_64_GLOB_DAT || t == R_X86_64_64;
}
#elif defined(__aarch64__)
constexpr bool kSupported = true;
bool handledType(unsigned t, bool* addend) {  // all three hold S + A
  *addend = true;
  return t == R_AARCH64_JUMP_SLOT || t == R_AARCH64_GLOB_DAT || t == R_AARCH64_ABS64;
}
#else
constexpr bool kSupported = false;
bool handledType(unsigned, bool*) { return false; }
#endif

struct Mapping {
  uintptr_t lo = 0, hi = 0;
  int prot = 0;
};

// The process's mapping that holds `addr`, from /proc/self/maps.
bool findMapping(uintptr_t addr, Mapping* out) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[512];
  bool found = false;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    if (addr < lo || addr >= hi) continue;
    out->lo = lo;
    out->hi = hi;
    out->prot =
        (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
    found = true;
    break;
  }
  fclose(f);
  return found;
}

// Stores `value` in the pointer-sized slot at `slot`, lifting a read-only
// protection (RELRO) for the store and putting it back after.
void storeSlot(uintptr_t slot, uintptr_t value, const char* name) {
  Mapping m;
  if (!findMapping(slot, &m))
    throwError(hetcclSystemError, std::string("rebinding ") + name + ": its GOT entry is in no mapping");
  if (m.prot & PROT_WRITE) {
    __atomic_store_n(reinterpret_cast<uintptr_t*>(slot), value, __ATOMIC_RELEASE);
    return;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = slot & ~(page - 1);
  if (mprotect(reinterpret_cast<void*>(lo), page, m.prot | PROT_WRITE) != 0)
    throwError(hetcclSystemError, std::string("rebinding ") + name + ": mprotect: " + strerror(errno));
  __atomic_store_n(reinterpret_cast<uintptr_t*>(slot), value, __ATOMIC_RELEASE);
  mprotect(reinterpret_cast<void*>(lo), page, m.prot);
}

bool hasPrefix(const char* name, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes)
    if (strncmp(name, p.c_str(), p.size()) == 0) return true;
  return false;
}

struct DynInfo {
  const ElfW(Sym) * symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  const ElfW(Rela) * jmprel = nullptr;
  size_t jmprelBytes = 0;
  const ElfW(Rela) * rela = nullptr;
  size_t relaBytes = 0;
  bool pltIsRela = true;
};

DynInfo readDynamic(const link_map* lm) {
  // glibc relocates the pointer entries of .dynamic in place on most
  // targets; others leave them as offsets from the load address.
  auto at = [lm](ElfW(Addr) v) { return v < lm->l_addr ? v + lm->l_addr : v; };
  DynInfo d;
  for (const ElfW(Dyn)* e = lm->l_ld; e->d_tag != DT_NULL; ++e) {
    switch (e->d_tag) {
      case DT_SYMTAB: d.symtab = reinterpret_cast<const ElfW(Sym)*>(at(e->d_un.d_ptr)); break;
      case DT_STRTAB: d.strtab = reinterpret_cast<const char*>(at(e->d_un.d_ptr)); break;
      case DT_STRSZ: d.strsz = e->d_un.d_val; break;
      case DT_JMPREL: d.jmprel = reinterpret_cast<const ElfW(Rela)*>(at(e->d_un.d_ptr)); break;
      case DT_PLTRELSZ: d.jmprelBytes = e->d_un.d_val; break;
      case DT_PLTREL: d.pltIsRela = e->d_un.d_val == DT_RELA; break;
      case DT_RELA: d.rela = reinterpret_cast<const ElfW(Rela)*>(at(e->d_un.d_ptr)); break;
      case DT_RELASZ: d.relaBytes = e->d_un.d_val; break;
      default: break;
    }
  }
  return d;
}

void rebindTable(const link_map* lm, const DynInfo& d, const ElfW(Rela) * rel, size_t bytes,
                 const std::vector<std::string>& prefixes, RebindResult* out) {
  if (!rel) return;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& r = rel[i];
    bool addend = false;
    if (!handledType(static_cast<unsigned>(ELF64_R_TYPE(r.r_info)), &addend)) continue;
    const ElfW(Sym)& s = d.symtab[ELF64_R_SYM(r.r_info)];
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0 || ELF64_ST_TYPE(s.st_info) != STT_FUNC) continue;
    if (s.st_name >= d.strsz) continue;
    const char* name = d.strtab + s.st_name;
    if (!hasPrefix(name, prefixes)) continue;
    uintptr_t own = lm->l_addr + s.st_value + (addend ? static_cast<uintptr_t>(r.r_addend) : 0);
    uintptr_t slot = lm->l_addr + r.r_offset;
    if (*reinterpret_cast<const uintptr_t*>(slot) == own) {
      ++out->alreadyHome;
      continue;
    }
    storeSlot(slot, own, name);
    out->rebound.push_back(name);
  }
}

}  // namespace

RebindResult rebindOwnApi(void* handle, const std::vector<std::string>& prefixes) {
  RebindResult out;
  if (!kSupported) {
    out.supported = false;
    return out;
  }
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld)
    throwError(hetcclSystemError, "rebinding a vendor library: dlinfo failed");
  DynInfo d = readDynamic(lm);
  if (!d.symtab || !d.strtab) return out;  // nothing exported, nothing to do
  if (d.pltIsRela) rebindTable(lm, d, d.jmprel, d.jmprelBytes, prefixes, &out);
  rebindTable(lm, d, d.rela, d.relaBytes, prefixes, &out);
  return out;
}

}  // namespace hetccl::nccl
