/* A stand-in for a vendor NCCL 2.30 that has the Parameter API, for the
 * drop-in's tests of keys it forwards (test_dropin_param.cc). No NCCL 2.30
 * is installed here and the emulated GPU's group library implements 2.28.9.
 *
 * Its parameters: NCCL_TEST_INT (an int32_t, 42) and NCCL_TEST_STR (text,
 * "ring"); any other key is ncclInvalidArgument. ncclParamDumpAll prints
 * "vendor NCCL_TEST_INT=42" and "vendor NCCL_TEST_STR=ring".
 *
 * The calls the drop-in's loader requires of any NCCL library are here only
 * to be found: communicators cannot be made (ncclGetUniqueId and the rest
 * return ncclInternalError, and the tests never call them). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { kOk = 0, kInternalError = 3, kInvalidArgument = 4 };

static const char* lastError = "";

int ncclGetVersion(int* version) {
  if (!version) return kInvalidArgument;
  *version = 23007; /* 2.30.7 */
  return kOk;
}
const char* ncclGetErrorString(int r) { return r == kOk ? "no error" : "test vendor error"; }
const char* ncclGetLastError(void* comm) { return lastError; }

/* Required by the loader, never called by the tests. */
#define NOT_HERE(name) \
  int name(void) { return kInternalError; }
NOT_HERE(ncclGetUniqueId)
NOT_HERE(ncclCommInitRank)
NOT_HERE(ncclCommDestroy)
NOT_HERE(ncclCommAbort)
NOT_HERE(ncclCommGetAsyncError)
NOT_HERE(ncclAllReduce)
NOT_HERE(ncclReduceScatter)
NOT_HERE(ncclAllGather)
NOT_HERE(ncclBroadcast)
NOT_HERE(ncclReduce)
NOT_HERE(ncclSend)
NOT_HERE(ncclRecv)
NOT_HERE(ncclGroupStart)
NOT_HERE(ncclGroupEnd)
NOT_HERE(ncclRedOpCreatePreMulSum)
NOT_HERE(ncclRedOpDestroy)

/* The Parameter API: a handle is the address of a key's entry. */
struct param {
  const char* key;
  int isInt;
  int32_t value;
  const char* text;
};
static struct param params[] = {{"NCCL_TEST_INT", 1, 42, "42"}, {"NCCL_TEST_STR", 0, 0, "ring"}};
enum { kParams = sizeof(params) / sizeof(params[0]) };

static struct param* find(const char* key) {
  for (int i = 0; i < kParams; ++i)
    if (key && strcmp(params[i].key, key) == 0) return &params[i];
  lastError = "the test vendor has no such parameter";
  return NULL;
}

int ncclParamBind(void** out, const char* key) {
  struct param* p = find(key);
  if (!out || !p) return kInvalidArgument;
  *out = p;
  return kOk;
}
int ncclParamGetI32(void* h, int32_t* out) {
  struct param* p = h;
  if (!p || !out || !p->isInt) return kInvalidArgument;
  *out = p->value;
  return kOk;
}
int ncclParamGetStr(void* h, const char** out) {
  struct param* p = h;
  if (!p || !out || p->isInt) return kInvalidArgument;
  *out = p->text;
  return kOk;
}
int ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  struct param* p = find(key);
  if (!p || !value || !valueLen) return kInvalidArgument;
  *value = p->text;
  *valueLen = (int)strlen(p->text);
  return kOk;
}
int ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  static const char* keys[kParams];
  for (int i = 0; i < kParams; ++i) keys[i] = params[i].key;
  *table = keys;
  *tableLen = kParams;
  return kOk;
}
void ncclParamDumpAll(void) {
  for (int i = 0; i < kParams; ++i) printf("vendor %s=%s\n", params[i].key, params[i].text);
}
