// The 128-byte unique id: vendor-neutral, so NVIDIA and AMD ranks can share
// the same bytes. Layout (little-endian): magic "HTCL", protocol version,
// root address (family, port, 16 address bytes), the size of the communicator
// a grow id grows (0 otherwise), job id, 32-byte secret.
#pragma once

#include <cstdint>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "hetccl/hetccl.h"

namespace hetccl {

struct IdContents {
  SockAddr root;
  uint64_t jobId = 0;
  Secret secret{};
  // hetcclCommGetUniqueId's id: the size of the communicator it grows (its
  // ranks keep their numbers; new ranks take the numbers from here on). 0:
  // an id of hetcclGetUniqueId.
  int growFrom = 0;
  // Not in the id's bytes: this process derived the secret from launcher
  // facts others can guess (hetcclCommInitFromEnv without a secret of the
  // job's own), so it cannot key encrypted links.
  bool weakSecret = false;
};

hetcclUniqueId encodeUniqueId(const IdContents& c);
// Throws hetcclInvalidArgument naming what is wrong (not a hetccl id, another
// protocol version, bad address family).
IdContents decodeUniqueId(const hetcclUniqueId& id);

// A fresh job id and secret for `root`.
IdContents newIdContents(const SockAddr& root);

}  // namespace hetccl
