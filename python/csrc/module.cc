// Python entry points of hetccl_torch._C.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "hetccl_backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "hetccl's torch.distributed backend (use hetccl_torch, not this module)";
  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
         const std::string& device,
         const std::string& group) { return hetccl_torch::createBackend(store, rank, size, timeout, device, group); },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("device"), py::arg("group"),
      py::call_guard<py::gil_scoped_release>(),
      "Creates the hetccl backend of one process group (device: 'cuda' or 'host'; group: '' for the default).");
  m.def("hetccl_version", [] {
    int v = 0;
    hetcclGetVersion(&v);
    return v;
  });
  m.attr("torch2") = py::bool_(HETCCL_TORCH2 != 0);
}
