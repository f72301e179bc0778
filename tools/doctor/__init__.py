"""hetccl-doctor --node: checks of one node's RDMA, GPU and system setup."""
