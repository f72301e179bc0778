// Where the plugins hetccl ships beside itself are: the directory of the
// shared object (or executable) that holds hetccl's code.
#pragma once

#include <string>
#include <vector>

namespace hetccl {

std::string thisLibraryDir();
// Where to look for a plugin, in order: beside the code, then the folder
// above it, where libhetccl and the plugins are when the code is a drop-in
// (lib/hetccl-dropin/libnccl.so.2 installed, build/dropin/ in a build tree).
std::vector<std::string> pluginDirs();

}  // namespace hetccl
