// The emulated runtime's graphs, as its streams record into them while a
// capture is under way (emu_stream.cc) and as emu_graph.cc instantiates and
// launches them.
//
// A graph is the captured work in the order it was enqueued, each node on
// a lane: lane 0 is the stream the capture began on, lane k > 0 the k-th
// stream that joined it (by waiting on an event recorded in the capture).
// Event records and waits between lanes are nodes of their own, each record
// with an event of its own, so a launch that enqueues the nodes again in
// the same order (lane 0 on the launch stream, the others on streams of the
// exec) keeps every dependency the capture had.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "emu/emu_runtime.h"

namespace emu {

enum class NodeKind { kWork, kRecord, kWait };

struct Node {
  int lane = 0;
  NodeKind kind = NodeKind::kWork;
  int event = -1;              // kRecord, kWait: the record's own event
  std::function<void()> work;  // kWork: run again by every launch
};

// Where an event was last recorded inside a capture (emuEvent keeps one).
struct CapturedRecord {
  uint64_t capture = 0;  // the capture's id; 0: the last record was not captured
  int event = -1;        // the record's event in that graph
  int lane = 0;
  size_t node = 0;
};

}  // namespace emu

struct emuUserObject {
  std::mutex mu;
  unsigned refs = 0;
  void* ptr = nullptr;
  void (*destroy)(void*) = nullptr;
};

struct emuGraph {
  std::mutex mu;
  uint64_t captureId = 0;
  int captureMode = 0;  // the capture's, which streams that join it take
  std::thread::id captureThread;
  std::vector<emu::Node> nodes;
  int lanes = 1, events = 0;
  // Per lane: its last node, and whether a node of another lane waits on a
  // record that is that last node (the lane joined back; lane 0 ignored).
  std::vector<size_t> lastNode{SIZE_MAX};
  std::vector<bool> joined{true};
  // User objects the graph holds references of (emuGraphRetainUserObject).
  std::map<emuUserObject*, unsigned> owned;
};

namespace emu {

// Recording (the graph's own lock is taken; callers hold their stream's).
void graphAddWork(emuGraph* g, int lane, std::function<void()> work);
// A record node on `lane`; fills `rec` with where it is.
void graphAddRecord(emuGraph* g, int lane, CapturedRecord* rec);
// A wait node on `lane` for the record `rec` of the same graph.
void graphAddWait(emuGraph* g, int lane, const CapturedRecord& rec);
int graphNewLane(emuGraph* g);
// Whether every lane that joined the capture joined back (CUDA refuses to
// end a capture otherwise: cudaErrorStreamCaptureUnjoined).
bool graphJoined(emuGraph* g);
// The graph a capture under way records into, by its id; null once ended.
emuGraph* activeCapture(uint64_t id);
void setActiveCapture(uint64_t id, emuGraph* g);  // g null: ended

// User objects: references added and dropped; the last drop runs the
// destructor on the dropping thread.
void userObjectRetain(emuUserObject* o, unsigned n);
void userObjectRelease(emuUserObject* o, unsigned n);

}  // namespace emu
