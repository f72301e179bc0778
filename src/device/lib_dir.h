// Where the plugins hetccl ships beside itself are: the directory of the
// shared object (or executable) that holds hetccl's code.
#pragma once

#include <string>

namespace hetccl {

std::string thisLibraryDir();

}  // namespace hetccl
