"""hetccl-doctor --node: checks of one node's RDMA, GPU and system setup.

node.py runs the checks (checks_*.py, transport_choice.py) over a Node
(facts.py) read through a SysRoot (sysroot.py); report.py prints them.

What they read follows the kernel's sysfs and the output of fi_info,
ucx_info, ibv_devinfo and hetccl-info. They are tested on trees that
tests/doctor/node_tree.py writes and on machines without RDMA devices; no
real InfiniBand, RoCE, EFA or Slingshot port has been checked by them."""
