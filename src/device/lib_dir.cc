#include "device/lib_dir.h"

#include <dlfcn.h>

namespace hetccl {

std::string thisLibraryDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&thisLibraryDir), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::vector<std::string> pluginDirs() {
  std::string dir = thisLibraryDir();
  if (dir.empty()) return {};
  return {dir, dir + "/.."};
}

}  // namespace hetccl
