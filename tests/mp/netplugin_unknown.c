/* A network plugin that exports only ABI versions hetccl does not know
 * (an old v7 and a future v99): the net transport must refuse it, naming
 * the file and these symbols. The tables are never called. */
struct table {
  const char* name;
  void* entries[32];
};
struct table ncclNetPlugin_v7 = {"hetccl-test-unknown", {0}};
struct table ncclNetPlugin_v99 = {"hetccl-test-unknown", {0}};
