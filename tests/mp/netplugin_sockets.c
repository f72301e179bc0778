/* A network plugin of NCCL's ABI over TCP sockets, built by the tests so that
 * hetccl's net transport runs against a plugin it did not write for itself.
 * It exports ncclNetPlugin_v8 to _v12 (the loader picks the newest,
 * HETCCL_NET_PLUGIN_ABI a lower one), one device, host memory only.
 *
 * A connection is one socket; every message is [u64 size][i32 tag][u32 0]
 * then the bytes. Requests of a comm complete in the order posted; test()
 * moves the comm's queue forward without blocking. A receive whose tag
 * differs from the sender's, or that is smaller than what arrives, fails.
 * isend/irecv check that the buffer lies inside the registered region.
 *
 * Test switches (environment):
 *   NETPLUGIN_TEST_FAIL=call:N  the Nth call of `call` (init, devices,
 *                               getProperties, listen, connect, accept, regMr,
 *                               isend, irecv, iflush, test) returns ncclSystemError
 *   NETPLUGIN_TEST_FLUSH=1      forceFlush in the properties (v9 and up), and
 *                               iflush returns a request that completes on its second test
 *   NETPLUGIN_TEST_BUSY=1       isend and irecv turn every other call away (request NULL)
 *   NETPLUGIN_TEST_RECORD=FILE  each init appends "init vN" (the ABI version called) to FILE
 *   NETPLUGIN_TEST_MAXP2P=N     the properties (v9 and up) declare N as the largest
 *                               transfer, and an isend of more fails (v12's longer
 *                               virtual-NIC list moves that field: a loader reading
 *                               another version's layout sends too much)
 *   NETPLUGIN_TEST_FLIP=N       the Nth receive of the process to complete has one byte
 *                               flipped (a link that alters data)
 *   NCCL_SOCKET_IFNAME, HETCCL_SOCKET_IFNAME: the interface (prefix) to listen on;
 *                               else the first non-loopback IPv4 one, else loopback. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kOk = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4, kRemoteError = 6 };
enum { kMaxRequests = 8, kHandleMagic = 0x4e455454 };

typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
static logger_t logf_;
#define WARN(...)                                               \
  do {                                                          \
    if (logf_) logf_(2, ~0ul, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- fault injection ---- */
static int failing(const char* call) {
  static char name[32];
  static long nth = -1, count = 0;
  if (nth < 0) {
    nth = 0;
    const char* s = getenv("NETPLUGIN_TEST_FAIL");
    const char* colon = s ? strchr(s, ':') : NULL;
    if (colon && (size_t)(colon - s) < sizeof(name)) {
      memcpy(name, s, (size_t)(colon - s));
      nth = atol(colon + 1);
    }
  }
  if (nth <= 0 || strcmp(call, name) != 0) return 0;
  if (++count != nth) return 0;
  WARN("NETPLUGIN_TEST_FAIL: call %ld of %s fails", nth, call);
  return 1;
}
#define INJECT(call) \
  if (failing(call)) return kSystemError

static int envOn(const char* v) {
  const char* s = getenv(v);
  return s && *s && strcmp(s, "0") != 0;
}

/* ---- objects ---- */
struct handle {
  uint32_t magic;
  struct sockaddr_in addr;
};
struct mr {
  uint32_t magic;
  char* base;
  size_t size;
};
struct req {
  int used, send, done, flush, flushTests;
  char* data;
  size_t size, moved, got;
  int tag;
  unsigned char head[16];
  size_t headDone;
  struct comm* c;
};
struct comm {
  int fd;
  int listen; /* a listen comm */
  struct req reqs[kMaxRequests];
  int head, count; /* queue of requests in order */
  int busyToggle;
};

static int setNonBlocking(int fd) { return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static struct in_addr pickAddress(void) {
  struct in_addr out;
  out.s_addr = htonl(INADDR_LOOPBACK);
  const char* want = getenv("NCCL_SOCKET_IFNAME");
  if (!want || !*want) want = getenv("HETCCL_SOCKET_IFNAME");
  struct ifaddrs* all = NULL;
  if (getifaddrs(&all) != 0) return out;
  for (struct ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    int loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (want && *want ? strncmp(i->ifa_name, want, strlen(want)) != 0 : loop) continue;
    out = ((struct sockaddr_in*)i->ifa_addr)->sin_addr;
    break;
  }
  freeifaddrs(all);
  return out;
}

/* ---- calls shared by every version ---- */
static int pInit(logger_t log, int version) {
  logf_ = log;
  const char* rec = getenv("NETPLUGIN_TEST_RECORD");
  FILE* f = rec && *rec ? fopen(rec, "a") : NULL;
  if (f) {
    fprintf(f, "init v%d\n", version);
    fclose(f);
  }
  INJECT("init");
  return kOk;
}
static int pDevices(int* n) {
  INJECT("devices");
  *n = 1;
  return kOk;
}
static int pListen(int dev, void* handle, void** listenComm) {
  INJECT("listen");
  if (dev != 0) return kInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kSystemError;
  struct handle* h = (struct handle*)handle;
  memset(h, 0, sizeof(*h));
  h->magic = kHandleMagic;
  h->addr.sin_family = AF_INET;
  h->addr.sin_addr = pickAddress();
  socklen_t len = sizeof(h->addr);
  if (bind(fd, (struct sockaddr*)&h->addr, len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr*)&h->addr, &len) != 0 || setNonBlocking(fd) != 0) {
    WARN("listen: %s", strerror(errno));
    close(fd);
    return kSystemError;
  }
  struct comm* c = calloc(1, sizeof(*c));
  c->fd = fd;
  c->listen = 1;
  *listenComm = c;
  return kOk;
}
static struct comm* newComm(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setNonBlocking(fd);
  struct comm* c = calloc(1, sizeof(*c));
  c->fd = fd;
  return c;
}
static int pConnect(int dev, void* handle, void** sendComm) {
  INJECT("connect");
  *sendComm = NULL;
  const struct handle* h = (const struct handle*)handle;
  if (h->magic != kHandleMagic) return kInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kSystemError;
  /* A listening socket takes the connection into its backlog: this does not wait for accept. */
  if (connect(fd, (const struct sockaddr*)&h->addr, sizeof(h->addr)) != 0) {
    WARN("connect to %s:%d: %s", inet_ntoa(h->addr.sin_addr), ntohs(h->addr.sin_port), strerror(errno));
    close(fd);
    return kSystemError;
  }
  *sendComm = newComm(fd);
  return kOk;
}
static int pAccept(void* listenComm, void** recvComm) {
  INJECT("accept");
  *recvComm = NULL;
  struct comm* l = (struct comm*)listenComm;
  int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kOk : kSystemError;
  *recvComm = newComm(fd);
  return kOk;
}
static int pRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  INJECT("regMr");
  if (type != 1) return kInvalidArgument; /* host memory only */
  struct mr* m = malloc(sizeof(*m));
  m->magic = kHandleMagic;
  m->base = data;
  m->size = size;
  *mhandle = m;
  return kOk;
}
static int pRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t off, int fd, void** mhandle) {
  return kInternalError;
}
static int pDeregMr(void* comm, void* mhandle) {
  struct mr* m = mhandle;
  if (!m || m->magic != kHandleMagic) return kInvalidArgument;
  m->magic = 0;
  free(m);
  return kOk;
}
static int inside(void* mhandle, void* data, size_t size) {
  const struct mr* m = mhandle;
  return m && m->magic == kHandleMagic && (char*)data >= m->base && (char*)data + size <= m->base + m->size;
}
static int post(struct comm* c, int send, void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = NULL;
  if (!inside(mhandle, data, size)) {
    WARN("%s of %zu bytes outside the registered memory", send ? "isend" : "irecv", size);
    return kInvalidArgument;
  }
  if (envOn("NETPLUGIN_TEST_BUSY") && (c->busyToggle ^= 1)) return kOk;
  if (c->count == kMaxRequests) return kOk; /* full: the caller tries again */
  struct req* r = &c->reqs[(c->head + c->count++) % kMaxRequests];
  memset(r, 0, sizeof(*r));
  r->used = 1;
  r->send = send;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->c = c;
  if (send) {
    uint64_t sz = size;
    memcpy(r->head, &sz, 8);
    memcpy(r->head + 8, &tag, 4);
  }
  *request = r;
  return kOk;
}
/* Moves the comm's oldest request forward; kOk with nothing to do, else an error. */
static int progress(struct comm* c) {
  while (c->count > 0) {
    struct req* r = &c->reqs[c->head];
    if (r->done) return kOk; /* waits for its test */
    while (r->headDone < sizeof(r->head)) {
      ssize_t n = r->send ? send(c->fd, r->head + r->headDone, sizeof(r->head) - r->headDone, MSG_NOSIGNAL)
                          : recv(c->fd, r->head + r->headDone, sizeof(r->head) - r->headDone, 0);
      if (n == 0) return kRemoteError;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kOk : kRemoteError;
      r->headDone += (size_t)n;
    }
    if (!r->send && r->moved == 0 && r->got == 0) {
      uint64_t sz;
      int tag;
      memcpy(&sz, r->head, 8);
      memcpy(&tag, r->head + 8, 4);
      if (tag != r->tag || sz > r->size) {
        WARN("a message of %llu bytes with tag %d met a receive of %zu bytes with tag %d", (unsigned long long)sz, tag,
             r->size, r->tag);
        return kInternalError;
      }
      r->got = sz ? sz : (size_t)-1;
    }
    size_t want = r->send ? r->size : (r->got == (size_t)-1 ? 0 : r->got);
    while (r->moved < want) {
      ssize_t n = r->send ? send(c->fd, r->data + r->moved, want - r->moved, MSG_NOSIGNAL)
                          : recv(c->fd, r->data + r->moved, want - r->moved, 0);
      if (n == 0) return kRemoteError;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kOk : kRemoteError;
      r->moved += (size_t)n;
    }
    r->done = 1;
    if (!r->send && want > 0) {
      static long received = 0;
      const char* flip = getenv("NETPLUGIN_TEST_FLIP");
      if (flip && ++received == atol(flip)) r->data[want / 2] ^= 0x20;
    }
    return kOk;
  }
  return kOk;
}
static size_t maxP2p(void) {
  const char* s = getenv("NETPLUGIN_TEST_MAXP2P");
  return s && *s ? (size_t)strtoull(s, NULL, 10) : (size_t)1 << 30;
}
static int pIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  INJECT("isend");
  if (size > maxP2p()) {
    WARN("isend of %zu bytes: more than maxP2pBytes (%zu)", size, maxP2p());
    return kInvalidArgument;
  }
  return post(sendComm, 1, data, size, tag, mhandle, request);
}
static int pIrecv(void* recvComm, int n, void** data, size_t size, int* tags, void** mhandles, void** request) {
  INJECT("irecv");
  if (n != 1) return kInvalidArgument;
  return post(recvComm, 0, data[0], size, tags[0], mhandles[0], request);
}
static struct req flushReqs[kMaxRequests];
static int pIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  INJECT("iflush");
  *request = NULL;
  if (!envOn("NETPLUGIN_TEST_FLUSH")) return kOk; /* nothing to flush: no request */
  for (int i = 0; i < kMaxRequests; ++i)
    if (!flushReqs[i].used) {
      memset(&flushReqs[i], 0, sizeof(flushReqs[i]));
      flushReqs[i].used = flushReqs[i].flush = 1;
      *request = &flushReqs[i];
      return kOk;
    }
  return kInternalError;
}
static int pTest(void* request, int* done, int* size) {
  INJECT("test");
  struct req* r = request;
  *done = 0;
  if (r->flush) {
    if (++r->flushTests >= 2) {
      *done = 1;
      r->used = 0;
      if (size) *size = 0;
    }
    return kOk;
  }
  struct comm* c = r->c;
  int rc = progress(c);
  if (rc != kOk) {
    WARN("%s on a connection failed: %s", r->send ? "send" : "receive",
         rc == kRemoteError ? "the peer closed it" : "bad data");
    return rc;
  }
  if (!r->done) return kOk;
  if (r != &c->reqs[c->head]) return kOk; /* an older one first */
  *done = 1;
  if (size) *size = (int)(r->send ? r->size : (r->got == (size_t)-1 ? 0 : r->got));
  r->used = 0;
  c->head = (c->head + 1) % kMaxRequests;
  --c->count;
  progress(c); /* start the next one */
  return kOk;
}
static int pClose(void* comm) {
  struct comm* c = comm;
  if (!c) return kOk;
  close(c->fd);
  free(c);
  return kOk;
}

/* ---- properties by version ---- */
struct vprops {
  int ndevs;
  int devs[4];
};
struct propsV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, speed, port;
  float latency;
  int maxComms, maxRecvs, netDeviceType, netDeviceVersion;
};
struct propsV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs, netDeviceType, netDeviceVersion;
  struct vprops vProps;
  size_t maxP2pBytes, maxCollBytes;
};
struct propsV11 {
  struct propsV9 v9;
  int maxMultiRequestSize;
};
struct propsV12 { /* v11's with up to 8 devices per virtual NIC, then rail and plane */
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs, netDeviceType, netDeviceVersion;
  struct {
    int ndevs;
    int devs[8];
  } vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId, planeId;
};
static char kName[] = "hetccl-test-sockets";
static int pPropsV8(int dev, struct propsV8* p) {
  INJECT("getProperties");
  memset(p, 0, sizeof(*p));
  p->name = kName;
  p->ptrSupport = 1;
  p->speed = 10000;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return kOk;
}
static int pPropsV9(int dev, struct propsV9* p) {
  INJECT("getProperties");
  memset(p, 0, sizeof(*p));
  p->name = kName;
  p->ptrSupport = 1;
  p->forceFlush = envOn("NETPLUGIN_TEST_FLUSH");
  p->speed = 10000;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->vProps.ndevs = 1;
  p->maxP2pBytes = maxP2p();
  p->maxCollBytes = (size_t)1 << 30;
  return kOk;
}
static int pPropsV11(int dev, struct propsV11* p) {
  int rc = pPropsV9(dev, &p->v9);
  p->maxMultiRequestSize = 1;
  return rc;
}
static int pPropsV12(int dev, struct propsV12* p) {
  struct propsV11 v11;
  int rc = pPropsV11(dev, &v11);
  memset(p, 0, sizeof(*p));
  memcpy(p, &v11, offsetof(struct propsV9, vProps)); /* the fields before vProps are alike */
  p->vProps.ndevs = 1;
  p->maxP2pBytes = v11.v9.maxP2pBytes;
  p->maxCollBytes = v11.v9.maxCollBytes;
  p->maxMultiRequestSize = 1;
  return rc;
}

/* ---- the tables ---- */
static int v8Connect(int dev, void* h, void** sc, void** devComm) { return pConnect(dev, h, sc); }
static int v8Accept(void* l, void** rc, void** devComm) { return pAccept(l, rc); }
static int v8Isend(void* c, void* d, int size, int tag, void* mh, void** r) {
  return pIsend(c, d, (size_t)size, tag, mh, r);
}
static int v8Irecv(void* c, int n, void** d, int* sizes, int* tags, void** mh, void** r) {
  return pIrecv(c, n, d, n == 1 ? (size_t)sizes[0] : 0, tags, mh, r);
}
static int v9Isend(void* c, void* d, size_t size, int tag, void* mh, void** r) {
  return pIsend(c, d, size, tag, mh, r);
}
static int v9Irecv(void* c, int n, void** d, size_t* sizes, int* tags, void** mh, void** r) {
  return pIrecv(c, n, d, n == 1 ? sizes[0] : 0, tags, mh, r);
}
static int v8Init(logger_t log) { return pInit(log, 8); }
static int v9Init(logger_t log) { return pInit(log, 9); }
static int v10Init(logger_t log, void* prof) { return pInit(log, 10); }
static int v10Connect(int dev, void* config, void* h, void** sc, void** devComm) { return pConnect(dev, h, sc); }
static int v10Isend(void* c, void* d, size_t size, int tag, void* mh, void* ph, void** r) {
  return pIsend(c, d, size, tag, mh, r);
}
static int v10Irecv(void* c, int n, void** d, size_t* sizes, int* tags, void** mh, void** ph, void** r) {
  return pIrecv(c, n, d, n == 1 ? sizes[0] : 0, tags, mh, r);
}
static int v11Ctx;
static int v11Init(void** ctx, uint64_t commId, void* config, logger_t log, void* prof) {
  int rc = pInit(log, 11);
  *ctx = &v11Ctx;
  return rc;
}
static int v11Listen(void* ctx, int dev, void* h, void** l) {
  return ctx == &v11Ctx ? pListen(dev, h, l) : kInvalidArgument;
}
static int v11Connect(void* ctx, int dev, void* h, void** sc, void** devComm) {
  return ctx == &v11Ctx ? pConnect(dev, h, sc) : kInvalidArgument;
}
static int v11Finalize(void* ctx) { return kOk; }
static int v12Init(void** ctx, uint64_t commId, void* config, logger_t log, void* prof) {
  int rc = pInit(log, 12);
  *ctx = &v11Ctx; /* listen and connect are v11's */
  return rc;
}

struct {
  const char* name;
  int (*init)(logger_t);
  int (*devices)(int*);
  int (*getProperties)(int, struct propsV8*);
  int (*listen)(int, void*, void**);
  int (*connect)(int, void*, void**, void**);
  int (*accept)(void*, void**, void**);
  int (*regMr)(void*, void*, size_t, int, void**);
  int (*regMrDmaBuf)(void*, void*, size_t, int, uint64_t, int, void**);
  int (*deregMr)(void*, void*);
  int (*isend)(void*, void*, int, int, void*, void**);
  int (*irecv)(void*, int, void**, int*, int*, void**, void**);
  int (*iflush)(void*, int, void**, int*, void**, void**);
  int (*test)(void*, int*, int*);
  int (*closeSend)(void*);
  int (*closeRecv)(void*);
  int (*closeListen)(void*);
  void* getDeviceMr;
  void* irecvConsumed;
} ncclNetPlugin_v8 = {kName,  v8Init,       pDevices, pPropsV8, pListen, v8Connect, v8Accept,
                      pRegMr, pRegMrDmaBuf, pDeregMr, v8Isend,  v8Irecv, pIflush,   pTest,
                      pClose, pClose,       pClose,   NULL,     NULL};

struct {
  const char* name;
  int (*init)(logger_t);
  int (*devices)(int*);
  int (*getProperties)(int, struct propsV9*);
  int (*listen)(int, void*, void**);
  int (*connect)(int, void*, void**, void**);
  int (*accept)(void*, void**, void**);
  int (*regMr)(void*, void*, size_t, int, void**);
  int (*regMrDmaBuf)(void*, void*, size_t, int, uint64_t, int, void**);
  int (*deregMr)(void*, void*);
  int (*isend)(void*, void*, size_t, int, void*, void**);
  int (*irecv)(void*, int, void**, size_t*, int*, void**, void**);
  int (*iflush)(void*, int, void**, int*, void**, void**);
  int (*test)(void*, int*, int*);
  int (*closeSend)(void*);
  int (*closeRecv)(void*);
  int (*closeListen)(void*);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
} ncclNetPlugin_v9 = {kName,  v9Init,       pDevices, pPropsV9, pListen, v8Connect, v8Accept,
                      pRegMr, pRegMrDmaBuf, pDeregMr, v9Isend,  v9Irecv, pIflush,   pTest,
                      pClose, pClose,       pClose,   NULL,     NULL,    NULL};

struct {
  const char* name;
  int (*init)(logger_t, void*);
  int (*devices)(int*);
  int (*getProperties)(int, struct propsV9*);
  int (*listen)(int, void*, void**);
  int (*connect)(int, void*, void*, void**, void**);
  int (*accept)(void*, void**, void**);
  int (*regMr)(void*, void*, size_t, int, void**);
  int (*regMrDmaBuf)(void*, void*, size_t, int, uint64_t, int, void**);
  int (*deregMr)(void*, void*);
  int (*isend)(void*, void*, size_t, int, void*, void*, void**);
  int (*irecv)(void*, int, void**, size_t*, int*, void**, void**, void**);
  int (*iflush)(void*, int, void**, int*, void**, void**);
  int (*test)(void*, int*, int*);
  int (*closeSend)(void*);
  int (*closeRecv)(void*);
  int (*closeListen)(void*);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
} ncclNetPlugin_v10 = {kName,  v10Init,      pDevices, pPropsV9, pListen,  v10Connect, v8Accept,
                       pRegMr, pRegMrDmaBuf, pDeregMr, v10Isend, v10Irecv, pIflush,    pTest,
                       pClose, pClose,       pClose,   NULL,     NULL,     NULL};

struct tableV11 {
  const char* name;
  int (*init)(void**, uint64_t, void*, logger_t, void*);
  int (*devices)(int*);
  int (*getProperties)(int, struct propsV11*);
  int (*listen)(void*, int, void*, void**);
  int (*connect)(void*, int, void*, void**, void**);
  int (*accept)(void*, void**, void**);
  int (*regMr)(void*, void*, size_t, int, void**);
  int (*regMrDmaBuf)(void*, void*, size_t, int, uint64_t, int, void**);
  int (*deregMr)(void*, void*);
  int (*isend)(void*, void*, size_t, int, void*, void*, void**);
  int (*irecv)(void*, int, void**, size_t*, int*, void**, void**, void**);
  int (*iflush)(void*, int, void**, int*, void**, void**);
  int (*test)(void*, int*, int*);
  int (*closeSend)(void*);
  int (*closeRecv)(void*);
  int (*closeListen)(void*);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
  int (*finalize)(void*);
  void* setNetAttr;
} ncclNetPlugin_v11 = {kName,        v11Init,  pDevices, pPropsV11, v11Listen,   v11Connect, v8Accept, pRegMr,
                       pRegMrDmaBuf, pDeregMr, v10Isend, v10Irecv,  pIflush,     pTest,      pClose,   pClose,
                       pClose,       NULL,     NULL,     NULL,      v11Finalize, NULL};

/* v12's table is v11's; its properties are longer (the loader reads them as v12's). */
struct tableV11 ncclNetPlugin_v12 = {kName,        v12Init,    pDevices, (int (*)(int, struct propsV11*))pPropsV12,
                                     v11Listen,    v11Connect, v8Accept, pRegMr,
                                     pRegMrDmaBuf, pDeregMr,   v10Isend, v10Irecv,
                                     pIflush,      pTest,      pClose,   pClose,
                                     pClose,       NULL,       NULL,     NULL,
                                     v11Finalize,  NULL};
