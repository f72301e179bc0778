// Stream capture in the emulated runtime: beginning and ending a capture,
// streams joining it through events, its status, and CUDA's rule on calls
// during a capture. What a capture records goes into its graph
// (emu_graph.cc).
#include <algorithm>

#include "emu/emu_stream.h"

namespace emu {

namespace {
// The calling thread's capture mode (0 global, 1 thread-local, 2 relaxed:
// cudaStreamCaptureMode's values).
thread_local int tCaptureMode = 0;
}  // namespace

std::mutex& captureMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<emuStream*>& capturing() {
  static auto* v = new std::vector<emuStream*>;
  return *v;
}

bool unsafeDuringCapture() {
  std::lock_guard<std::mutex> g(captureMu());
  if (tCaptureMode == 2) return false;
  bool refused = false;
  for (emuStream* s : capturing()) {
    std::lock_guard<std::mutex> sg(s->mu);
    const bool mine = s->captureThread == std::this_thread::get_id();
    if ((mine && s->captureMode != 2) || (!mine && s->captureMode == 0 && tCaptureMode == 0)) {
      s->captureStatus = 2;
      refused = true;
    }
  }
  return refused;
}

emuError_t captureWait(emuStream* s, emuEvent* event) {
  const CapturedRecord rec = event->captured();
  std::lock_guard<std::mutex> g(captureMu());
  emuGraph* graph = rec.capture ? activeCapture(rec.capture) : nullptr;
  std::lock_guard<std::mutex> sg(s->mu);
  if (s->captureStatus == 2) return emuSuccess;  // invalidated: nothing more is recorded
  if (s->captureStatus == 1) {
    if (graph && graph == s->captureGraph) {
      graphAddWait(graph, s->captureLane, rec);
      return emuSuccess;
    }
    if (!graph && event->last() == 0) return emuSuccess;  // never recorded: nothing to wait for
    // Work outside the capture (or in another one) cannot order the graph.
    s->captureStatus = 2;
    return setError(graph ? emuErrorStreamCaptureMerge : emuErrorStreamCaptureIsolation);
  }
  if (!graph) return emuErrorNotReady;
  s->captureMode = graph->captureMode;  // joins the capture, of its mode and thread
  s->captureThread = graph->captureThread;
  s->captureStatus = 1;
  s->captureGraph = graph;
  s->captureLane = graphNewLane(graph);
  capturing().push_back(s);
  graphAddWait(graph, s->captureLane, rec);
  return emuSuccess;
}

}  // namespace emu

emuError_t emuStreamBeginCapture(emuStream_t stream, int mode) {
  if (!stream || mode < 0 || mode > 2) return emu::setError(emuErrorInvalidValue);  // as CUDA: not the default stream
  static std::atomic<uint64_t> ids{0};
  std::lock_guard<std::mutex> g(emu::captureMu());
  std::lock_guard<std::mutex> sg(stream->mu);
  if (stream->captureStatus) return emu::setError(emuErrorInvalidValue);
  auto* graph = new emuGraph;
  graph->captureId = ids.fetch_add(1) + 1;
  graph->captureMode = mode;
  graph->captureThread = std::this_thread::get_id();
  emu::setActiveCapture(graph->captureId, graph);
  stream->captureStatus = 1;
  stream->captureMode = mode;
  stream->captureThread = graph->captureThread;
  stream->captureGraph = graph;
  stream->captureLane = 0;
  emu::capturing().push_back(stream);
  return emuSuccess;
}

// Ends the capture on the stream that began it: every stream that joined it
// leaves it too. Fails where the capture was invalidated (on any of its
// streams) or a joined stream was not joined back.
emuError_t emuStreamEndCapture(emuStream_t stream, emuGraph_t* graph) {
  if (!stream || !graph) return emu::setError(emuErrorInvalidValue);
  emuGraph* g = nullptr;
  bool invalidated = false;
  {
    std::lock_guard<std::mutex> cg(emu::captureMu());
    {
      std::lock_guard<std::mutex> sg(stream->mu);
      if (!stream->captureStatus) return emu::setError(emuErrorInvalidValue);
      if (stream->captureLane != 0) return emu::setError(emuErrorStreamCaptureUnmatched);
      // As CUDA: a capture not begun in relaxed mode ends on the thread that
      // began it; from another, the call fails and the capture goes on.
      if (stream->captureMode != 2 && stream->captureThread != std::this_thread::get_id())
        return emu::setError(emuErrorStreamCaptureWrongThread);
      g = stream->captureGraph;
    }
    auto& v = emu::capturing();
    for (auto it = v.begin(); it != v.end();) {
      emuStream* s = *it;
      std::lock_guard<std::mutex> sg(s->mu);
      if (s->captureGraph != g) {
        ++it;
        continue;
      }
      invalidated = invalidated || s->captureStatus == 2;
      s->captureStatus = 0;
      s->captureGraph = nullptr;
      s->captureLane = 0;
      it = v.erase(it);
    }
    emu::setActiveCapture(g->captureId, nullptr);
  }
  const bool joined = emu::graphJoined(g);
  if (!invalidated && joined) {
    *graph = g;
    return emuSuccess;
  }
  *graph = nullptr;
  emuGraphDestroy(g);
  return emu::setError(invalidated ? emuErrorStreamCaptureInvalidated : emuErrorStreamCaptureUnjoined);
}

emuError_t emuStreamIsCapturing(emuStream_t stream, int* status) {
  if (!status) return emu::setError(emuErrorInvalidValue);
  emuStream* s = emu::resolve(stream);
  std::lock_guard<std::mutex> g(s->mu);
  *status = s->captureStatus;
  return emuSuccess;
}

emuError_t emuStreamGetCaptureInfo(emuStream_t stream, int* status, unsigned long long* id, emuGraph_t* graph,
                                   const void** deps, size_t* numDeps) {
  if (!status) return emu::setError(emuErrorInvalidValue);
  emuStream* s = emu::resolve(stream);
  std::lock_guard<std::mutex> g(s->mu);
  *status = s->captureStatus;
  if (id) *id = s->captureGraph ? s->captureGraph->captureId : 0;
  if (graph) *graph = s->captureStatus == 1 ? s->captureGraph : nullptr;
  if (deps) *deps = nullptr;
  if (numDeps) *numDeps = 0;
  return emuSuccess;
}

emuError_t emuThreadExchangeStreamCaptureMode(int* mode) {
  if (!mode || *mode < 0 || *mode > 2) return emu::setError(emuErrorInvalidValue);
  std::swap(*mode, emu::tCaptureMode);
  return emuSuccess;
}
