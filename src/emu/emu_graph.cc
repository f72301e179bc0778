// The emulated runtime's graphs (emu_graph.h): recording while capturing,
// instantiation, launch, destruction, and user objects, under CUDA's names
// and error codes.
#include "emu/emu_graph.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "emu/emu_state.h"

struct emuGraphExec {
  std::mutex mu;                   // launches of one exec one at a time
  std::vector<emu::Node> nodes;    // the graph's, copied: the graph may go first
  std::vector<emuStream_t> lanes;  // lane k > 0 (lanes[0] unused: the launch stream)
  std::vector<emuEvent_t> events;  // one per record node
  std::map<emuUserObject*, unsigned> owned;
  emuEvent_t done = nullptr;  // the end of the last launch
  bool launched = false;
};

namespace emu {
namespace {

std::mutex& activeMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<uint64_t, emuGraph*>& active() {
  static auto* m = new std::map<uint64_t, emuGraph*>;
  return *m;
}

void addNode(emuGraph* g, Node n) {
  const int lane = n.lane;
  g->nodes.push_back(std::move(n));
  g->lastNode[lane] = g->nodes.size() - 1;
  g->joined[lane] = lane == 0;
}

}  // namespace

void graphAddWork(emuGraph* g, int lane, std::function<void()> work) {
  std::lock_guard<std::mutex> l(g->mu);
  addNode(g, Node{lane, NodeKind::kWork, -1, std::move(work)});
}

void graphAddRecord(emuGraph* g, int lane, CapturedRecord* rec) {
  std::lock_guard<std::mutex> l(g->mu);
  const int event = g->events++;
  addNode(g, Node{lane, NodeKind::kRecord, event, {}});
  *rec = CapturedRecord{g->captureId, event, lane, g->nodes.size() - 1};
}

void graphAddWait(emuGraph* g, int lane, const CapturedRecord& rec) {
  std::lock_guard<std::mutex> l(g->mu);
  // The waited-on lane joins back where the record is its last node.
  const bool joins = rec.lane != lane && g->lastNode[rec.lane] == rec.node;
  addNode(g, Node{lane, NodeKind::kWait, rec.event, {}});
  if (joins) g->joined[rec.lane] = true;
}

int graphNewLane(emuGraph* g) {
  std::lock_guard<std::mutex> l(g->mu);
  g->lastNode.push_back(SIZE_MAX);
  g->joined.push_back(true);  // nothing recorded on it yet
  return g->lanes++;
}

bool graphJoined(emuGraph* g) {
  std::lock_guard<std::mutex> l(g->mu);
  for (int k = 1; k < g->lanes; ++k)
    if (!g->joined[k]) return false;
  return true;
}

emuGraph* activeCapture(uint64_t id) {
  std::lock_guard<std::mutex> l(activeMu());
  auto it = active().find(id);
  return it == active().end() ? nullptr : it->second;
}

void setActiveCapture(uint64_t id, emuGraph* g) {
  std::lock_guard<std::mutex> l(activeMu());
  if (g)
    active()[id] = g;
  else
    active().erase(id);
}

void userObjectRetain(emuUserObject* o, unsigned n) {
  std::lock_guard<std::mutex> l(o->mu);
  o->refs += n;
}

void userObjectRelease(emuUserObject* o, unsigned n) {
  {
    std::lock_guard<std::mutex> l(o->mu);
    o->refs -= std::min(n, o->refs);
    if (o->refs) return;
  }
  if (o->destroy) o->destroy(o->ptr);
  delete o;
}

}  // namespace emu

emuError_t emuGraphInstantiate(emuGraphExec_t* exec, emuGraph_t graph, unsigned long long flags) {
  if (!exec || !graph || flags) return emu::setError(emuErrorInvalidValue);
  auto e = std::make_unique<emuGraphExec>();
  {
    std::lock_guard<std::mutex> l(graph->mu);
    e->nodes = graph->nodes;
    e->owned = graph->owned;
    e->lanes.assign(graph->lanes, nullptr);
    e->events.assign(graph->events, nullptr);
  }
  for (size_t k = 1; k < e->lanes.size(); ++k)
    if (emuStreamCreateWithFlags(&e->lanes[k], 0x1) != emuSuccess) return emu::setError(emuErrorMemoryAllocation);
  for (emuEvent_t& ev : e->events) emuEventCreateWithFlags(&ev, 0x2);
  emuEventCreateWithFlags(&e->done, 0x2);
  // The exec holds the graph's user objects too: they outlive the graph
  // while it lives (CUDA's rule).
  for (auto& [o, n] : e->owned) emu::userObjectRetain(o, n);
  *exec = e.release();
  return emuSuccess;
}

emuError_t emuGraphInstantiateWithFlags(emuGraphExec_t* exec, emuGraph_t graph, unsigned long long flags) {
  return emuGraphInstantiate(exec, graph, flags);
}

emuError_t emuGraphLaunch(emuGraphExec_t exec, emuStream_t stream) {
  if (!exec) return emu::setError(emuErrorInvalidValue);
  int status = 0;
  emuStreamIsCapturing(stream, &status);
  // A graph launched into a capture would be a child graph: not emulated.
  if (status) return emu::setError(emuErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> l(exec->mu);
  // Launches of one exec run one after the other, whatever their streams.
  if (exec->launched) emuStreamWaitEvent(stream, exec->done, 0);
  for (const emu::Node& n : exec->nodes) {
    emuStream_t s = n.lane == 0 ? stream : exec->lanes[n.lane];
    switch (n.kind) {
      case emu::NodeKind::kWork: emuEnqueue(s, n.work); break;
      case emu::NodeKind::kRecord: emuEventRecord(exec->events[n.event], s); break;
      case emu::NodeKind::kWait: emuStreamWaitEvent(s, exec->events[n.event], 0); break;
    }
  }
  // The launch holds the user objects until its work has run, so that
  // destroying the exec and the graph meanwhile frees nothing it uses.
  std::vector<std::pair<emuUserObject*, unsigned>> held(exec->owned.begin(), exec->owned.end());
  for (auto& [o, n] : held) emu::userObjectRetain(o, n);
  if (!held.empty())
    emuEnqueue(stream, [held] {
      for (auto& [o, n] : held) emu::userObjectRelease(o, n);
    });
  emuEventRecord(exec->done, stream);
  exec->launched = true;
  return emuSuccess;
}

// As CUDA: work already launched still runs (the lane streams and events
// go once it has).
emuError_t emuGraphExecDestroy(emuGraphExec_t exec) {
  if (!exec) return emu::setError(emuErrorInvalidValue);
  for (size_t k = 1; k < exec->lanes.size(); ++k) emuStreamDestroy(exec->lanes[k]);
  for (emuEvent_t ev : exec->events) emuEventDestroy(ev);
  emuEventDestroy(exec->done);
  for (auto& [o, n] : exec->owned) emu::userObjectRelease(o, n);
  delete exec;
  return emuSuccess;
}

emuError_t emuGraphDestroy(emuGraph_t graph) {
  if (!graph || emu::activeCapture(graph->captureId) == graph) return emu::setError(emuErrorInvalidValue);
  for (auto& [o, n] : graph->owned) emu::userObjectRelease(o, n);
  delete graph;
  return emuSuccess;
}

emuError_t emuUserObjectCreate(emuUserObject_t* obj, void* ptr, void (*destroy)(void*), unsigned initialRefcount,
                               unsigned flags) {
  // CUDA takes only cudaUserObjectNoDestructorSync (1), and requires it.
  if (!obj || !destroy || initialRefcount == 0 || flags != 1) return emu::setError(emuErrorInvalidValue);
  auto* o = new emuUserObject;
  o->refs = initialRefcount;
  o->ptr = ptr;
  o->destroy = destroy;
  *obj = o;
  return emuSuccess;
}

emuError_t emuUserObjectRetain(emuUserObject_t obj, unsigned count) {
  if (!obj || count == 0) return emu::setError(emuErrorInvalidValue);
  emu::userObjectRetain(obj, count);
  return emuSuccess;
}

emuError_t emuUserObjectRelease(emuUserObject_t obj, unsigned count) {
  if (!obj || count == 0) return emu::setError(emuErrorInvalidValue);
  emu::userObjectRelease(obj, count);
  return emuSuccess;
}

// flags 1 (cudaGraphUserObjectMove): the caller's references pass to the
// graph; else the graph takes references of its own.
emuError_t emuGraphRetainUserObject(emuGraph_t graph, emuUserObject_t obj, unsigned count, unsigned flags) {
  if (!graph || !obj || count == 0 || flags > 1) return emu::setError(emuErrorInvalidValue);
  if (flags == 0) emu::userObjectRetain(obj, count);
  std::lock_guard<std::mutex> l(graph->mu);
  graph->owned[obj] += count;
  return emuSuccess;
}

emuError_t emuGraphReleaseUserObject(emuGraph_t graph, emuUserObject_t obj, unsigned count) {
  if (!graph || !obj || count == 0) return emu::setError(emuErrorInvalidValue);
  {
    std::lock_guard<std::mutex> l(graph->mu);
    auto it = graph->owned.find(obj);
    if (it == graph->owned.end() || it->second < count) return emu::setError(emuErrorInvalidValue);
    if ((it->second -= count) == 0) graph->owned.erase(it);
  }
  emu::userObjectRelease(obj, count);
  return emuSuccess;
}
